"""Spend caps: held before each model call is sent, rebuilt from the journal on every attempt."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from pyrula.errors import BudgetExceeded
from pyrula.runtime.metering import prices


@dataclass(frozen=True, slots=True)
class AgentLimits:
    """Caps for one run: model calls, tokens (all kinds) and dollars."""

    max_llm_calls: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None


# Four bytes a token is the usual rule of thumb for English and JSON.
_BYTES_PER_TOKEN = 4


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

    def replayed(self, payload: dict[str, Any]) -> None:
        """Count an `llm:done` already in the journal."""
        self.calls += 1
        self.tokens += int(payload.get("total_tokens", 0))
        self.cost += float(payload.get("cost_usd") or 0.0)

    def reserve(self, request_bytes: int, meta: dict[str, Any]) -> Reservation:
        limits = self.limits
        worst_output = 0
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            if isinstance(meta.get(name), int):
                worst_output = int(meta[name])
        tokens = request_bytes // _BYTES_PER_TOKEN + worst_output
        model = meta.get("model")
        cost = 0.0
        if limits.max_cost_usd is not None:
            row = prices.row(model if isinstance(model, str) else None)
            if row is None:
                raise BudgetExceeded(
                    f"model {model!r} has no price, so max_cost_usd cannot be held; add one with "
                    "pyrula.runtime.metering.prices.add(...)",
                    limit="max_cost_usd",
                    code="unpriced_model",
                )
            cost = (tokens - worst_output) * row["input"] / 1e6 + worst_output * row["output"] / 1e6
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
