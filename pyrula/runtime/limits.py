"""Spend caps: held before each model call is sent, rebuilt from the journal on every attempt."""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields
from typing import Any

from pyrula.errors import BudgetExceeded
from pyrula.runtime.pricing import deployment, prices, requested_model


@dataclass(frozen=True, slots=True)
class AgentLimits:
    """Caps for one run: model calls, tokens (all kinds) and dollars."""

    max_llm_calls: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None

    def to_json(self) -> dict[str, int | float]:
        """The caps that are set, by name: what a run's record keeps (`options["limits"]`)."""
        set_caps = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: value for name, value in set_caps if value is not None}


# Four bytes a token is the usual rule of thumb for English and JSON.
_BYTES_PER_TOKEN = 4


# Where each provider puts the output cap: top level (OpenAI, Anthropic), Bedrock converse's
# `inferenceConfig`, Gemini's `generationConfig` (the SDK's `config`).
_OUTPUT_CAPS = (
    ((), ("max_tokens", "max_completion_tokens", "max_output_tokens")),
    (("inferenceConfig",), ("maxTokens",)),
    (("generationConfig",), ("maxOutputTokens",)),
    (("config",), ("max_output_tokens",)),
)


def worst_output_tokens(meta: dict[str, Any]) -> int:
    """The most output a request may be billed for, as its own output cap says (0: no cap)."""
    for path, names in _OUTPUT_CAPS:
        holder: Any = meta
        for key in path:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(holder, dict):
            continue
        for name in names:
            if isinstance(holder.get(name), int):
                return int(holder[name])
    return 0


def estimate_tokens(request_bytes: int, meta: dict[str, Any]) -> int:
    """A call's worst case before it is sent: its request's input estimate plus its output cap."""
    return request_bytes // _BYTES_PER_TOKEN + worst_output_tokens(meta)


@dataclass(frozen=True, slots=True)
class Reservation:
    calls: int
    tokens: int
    cost: float


class Budget:
    """What a run has spent and what its calls in flight may still spend.

    A call reserves its worst case (its request's input estimate plus its `max_tokens`) before it
    is sent, so concurrent calls in one run cannot overshoot a cap together; the reservation is
    swapped for the real usage when the reply arrives.
    """

    def __init__(self, limits: AgentLimits | None) -> None:
        self.limits = limits or AgentLimits()
        self.calls = 0
        self.tokens = 0
        self.cost = 0.0
        self._held = Reservation(0, 0, 0.0)
        self._lock = threading.Lock()
        # The model each name a call was sent to turned out to be, as its replies named it: an
        # Azure deployment or a Bedrock application inference profile is priced by it.
        self.served_by: dict[str, str | None] = {}

    @property
    def held(self) -> Reservation:
        """What the calls in flight have reserved and not settled yet."""
        return self._held

    def replayed(self, payload: dict[str, Any]) -> None:
        """Count an `llm:done` already in the journal."""
        self.calls += 1
        self.tokens += int(payload.get("total_tokens", 0))
        self.cost += float(payload.get("cost_usd") or 0.0)
        requested, status = payload.get("requested_model"), payload.get("status")
        if isinstance(requested, str) and isinstance(status, int) and 0 < status < 400:
            # An error reply names no model: it says nothing about what the name serves.
            model = payload.get("model")
            self.served_by[requested] = model if isinstance(model, str) else None

    def child_spent(self, payload: dict[str, Any]) -> None:
        """Count a finished child run's spend (a `child:spend` event) against this run's token
        and cost caps; its calls are its own (`max_llm_calls` counts this run's calls only)."""
        self.tokens += int(payload.get("total_tokens", 0))
        self.cost += float(payload.get("cost_usd") or 0.0)

    def price_row(self, meta: dict[str, Any]) -> tuple[dict[str, float] | None, bool]:
        """The price row a call's cost is held against, and whether a missing one is known.

        An opaque name (an Azure deployment, a Bedrock application inference profile ARN) is
        priced by a row of its own, else by the model its last reply named. Before any reply
        has named it there is nothing to price it by yet: (None, False), and the call goes
        out with no cost held, so a deployment's first call is not refused.
        """
        alias = deployment(meta)
        model = alias if alias is not None else requested_model(meta)
        row = prices.row(model)
        if row is not None or alias is None:
            return row, True
        if alias not in self.served_by:
            return None, False
        return prices.row(self.served_by[alias]), True

    def worst_cost(self, request_bytes: int, meta: dict[str, Any], cap: str) -> float:
        """The most a call may cost, priced as its input estimate plus its output cap (0.0
        where nothing names its model's price yet); a model known to have no price is refused,
        as `cap` (the cost cap's name in the message) cannot be held."""
        row, known = self.price_row(meta)
        if row is None and known:
            raise BudgetExceeded(self.unpriced(meta, cap), limit=cap, code="unpriced_model")
        if row is None:
            return 0.0
        worst_output = worst_output_tokens(meta)
        tokens = estimate_tokens(request_bytes, meta)
        return (tokens - worst_output) * row["input"] / 1e6 + worst_output * row["output"] / 1e6

    def reserve(self, request_bytes: int, meta: dict[str, Any]) -> Reservation:
        limits = self.limits
        tokens = estimate_tokens(request_bytes, meta)
        cost = 0.0
        if limits.max_cost_usd is not None:
            cost = self.worst_cost(request_bytes, meta, "max_cost_usd")
        with self._lock:
            held = self._held
            if limits.max_llm_calls is not None and self.calls + held.calls + 1 > (
                limits.max_llm_calls
            ):
                raise BudgetExceeded(
                    f"max_llm_calls={limits.max_llm_calls} reached ({self.calls} made); "
                    "raise AgentLimits(max_llm_calls=...) or end the run",
                    limit="max_llm_calls",
                )
            if limits.max_total_tokens is not None and self.tokens + held.tokens + tokens > (
                limits.max_total_tokens
            ):
                raise BudgetExceeded(
                    f"max_total_tokens={limits.max_total_tokens} would be exceeded "
                    f"({self.tokens} used, up to {tokens} more for this call); raise the cap or "
                    "lower max_tokens",
                    limit="max_total_tokens",
                )
            if limits.max_cost_usd is not None and self.cost + held.cost + cost > (
                limits.max_cost_usd
            ):
                raise BudgetExceeded(
                    f"max_cost_usd={limits.max_cost_usd} would be exceeded (${self.cost:.4f} "
                    f"spent, up to ${cost:.4f} more for this call)",
                    limit="max_cost_usd",
                )
            reservation = Reservation(1, tokens, cost)
            self._held = Reservation(held.calls + 1, held.tokens + tokens, held.cost + cost)
            return reservation

    def unpriced(self, meta: dict[str, Any], cap: str = "max_cost_usd") -> str:
        """Why a call's cost cannot be held to `cap`: its model has no price (the fix named)."""
        alias = deployment(meta)
        fix = "add one with pyrula.runtime.metering.prices.add(...)"
        if alias is None:
            model = requested_model(meta)
            return f"model {model!r} has no price, so {cap} cannot be held; {fix}"
        return (
            f"{alias!r} is served by model {self.served_by.get(alias)!r}, which has no price, so "
            f"{cap} cannot be held; {fix} (for that model, or for {alias!r} itself)"
        )

    def settle(self, reservation: Reservation, payload: dict[str, Any] | None) -> None:
        """Swap a reservation for what the call really used (None: it was not made)."""
        with self._lock:
            held = self._held
            self._held = Reservation(
                held.calls - reservation.calls,
                held.tokens - reservation.tokens,
                held.cost - reservation.cost,
            )
            if payload is not None:
                self.replayed(payload)
