"""A case's live budget: what one test case may spend on model calls that go out live.

A case (a pytest test, an `AgentRunner` run, an eval case in a loop) is a `LiveBudget` block.
While it is active, every model call about to be sent live (a cassette recording, a run with no
recording to replay) is held to it before it is sent, with the same reservation as a run's
`max_cost_usd`: the call's worst case (its input estimate, images and PDFs at their billing
bounds, plus its output cap, at its model's price) is reserved, so concurrent calls cannot
overshoot together, and is swapped for the reply's priced usage when it arrives. A call that
would spend past the budget raises `LiveBudgetExceeded` (code `live_budget_exceeded`) and is
never sent. A replayed call spends nothing and is never refused.

Every block meters what it spent live, budget or not (`spent`): the pytest plugin prints it per
case (`pyrula.pytest_budget`). Blocks nest: a call is held to each enclosing budget, and counts
in each (an `AgentRunner` run inside a test counts in the test's spend too).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from pyrula.errors import BudgetExceeded, LiveBudgetExceeded
from pyrula.fingerprints import Canonical, surfaces
from pyrula.journal.recorder import Reply
from pyrula.runtime.limits import AgentLimits, Budget, Reservation
from pyrula.runtime.llm_events import estimated_payload, llm_payload
from pyrula.runtime.media import billable_request_bytes
from pyrula.runtime.positions import MAIN
from pyrula.transport.gates import current_gate, pop_gate, push_gate

__all__ = ["LiveBudget", "LiveSpend"]

_CAP = "live_budget_usd"


@dataclass(frozen=True, slots=True)
class LiveSpend:
    """What a case's model calls sent live cost: `unpriced` of them had no price (counted at
    $0), `estimated` ended unfinished and count at least what was reserved for them."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0
    estimated: int = 0


class LiveBudget:
    """The live spend of one case, held to `max_usd` if given (None: metered only).

    Use it as a (sync or async) context manager around the case. `name` names the case in a
    refusal's message, `fix` what to change to allow more (the pytest marker, the runner's
    argument). After (or during) the block, `spent` says what went out live.
    """

    def __init__(
        self,
        max_usd: float | None = None,
        *,
        name: str = "this case",
        fix: str = "raise LiveBudget(max_usd=...)",
    ) -> None:
        if max_usd is not None and max_usd < 0:
            raise ValueError(f"a live budget is a cost in USD, 0 or more, not {max_usd!r}")
        self.max_usd = max_usd
        self.name = name
        self.fix = fix
        self._budget = Budget(AgentLimits(max_cost_usd=max_usd))
        self._lock = threading.Lock()
        self._spent = LiveSpend()
        self._outer: LiveBudget | None = None
        self._token: object = None

    @property
    def spent(self) -> LiveSpend:
        with self._lock:
            return self._spent

    # -- the gate the transports ask -----------------------------------------------------------

    def admit(self, body: bytes, canonical: Canonical) -> _MeteredCall | None:
        """Reserve the call's worst case in this budget and each enclosing one, or refuse it
        (`LiveBudgetExceeded`) with nothing reserved. A request that is not a model call (the
        generic surface: files, embeddings, ...) is neither held nor metered."""
        if canonical.surface == surfaces.GENERIC:
            return None
        request_bytes = billable_request_bytes(body, canonical.surface, canonical.meta)
        held: list[tuple[LiveBudget, Reservation]] = []
        budget: LiveBudget | None = self
        try:
            while budget is not None:
                held.append((budget, budget._reserve(request_bytes, canonical.meta)))
                budget = budget._outer
        except BaseException:
            for owner, reservation in held:
                owner._budget.settle(reservation, None)
            raise
        return _MeteredCall(canonical, held)

    def _reserve(self, request_bytes: int, meta: dict[str, Any]) -> Reservation:
        if self.max_usd == 0:  # even a call whose price is not known yet (a deployment's first)
            raise LiveBudgetExceeded(
                f"{self.name}: its live budget is $0 (replay only), so this call, which has no "
                f"recording to replay, was not sent; {self.fix}, or record it first"
            )
        try:
            return self._budget.reserve(request_bytes, meta)
        except BudgetExceeded as exc:
            if exc.code == "unpriced_model":
                raise LiveBudgetExceeded(
                    f"{self.name}: {self._budget.unpriced(meta, _CAP)}", code=exc.code
                ) from None
            worst = self._budget.worst_cost(request_bytes, meta, _CAP)
            in_flight = self._budget.held.cost
            held = f", ${in_flight:.4f} held by calls in flight" if in_flight else ""
            raise LiveBudgetExceeded(
                f"{self.name}: its live budget of ${self.max_usd:.4f} would be exceeded "
                f"(${self._budget.cost:.4f} spent live{held}, up to ${worst:.4f} more for this "
                "call), "
                f"so the call was not sent; {self.fix}, lower the call's max_tokens, or replay "
                "it from a recording (a replay spends nothing)"
            ) from None

    def _settle(self, reservation: Reservation, payload: dict[str, Any] | None) -> None:
        self._budget.settle(reservation, payload)
        if payload is None:
            return
        with self._lock:
            spent = self._spent
            self._spent = LiveSpend(
                spent.calls + 1,
                spent.input_tokens + int(payload.get("input_tokens") or 0),
                spent.output_tokens + int(payload.get("output_tokens") or 0),
                spent.cost_usd + float(payload.get("cost_usd") or 0.0),
                spent.unpriced + (payload.get("cost_usd") is None),
                spent.estimated + bool(payload.get("estimated")),
            )

    # -- activation ------------------------------------------------------------------------------

    def __enter__(self) -> LiveBudget:
        outer = current_gate()
        self._outer = outer if isinstance(outer, LiveBudget) else None
        self._token = push_gate(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        pop_gate(self, self._token)

    async def __aenter__(self) -> LiveBudget:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


class _MeteredCall:
    """The gate's sink for one call let through: its reply, priced as a run's `llm:done` is,
    settles what each budget reserved for it, once."""

    cap = 0  # it records nothing

    def __init__(self, canonical: Canonical, held: list[tuple[LiveBudget, Reservation]]) -> None:
        self._canonical = canonical
        self._held = held
        self._done = threading.Event()

    def _end(self, payload: dict[str, Any] | None) -> None:
        if self._done.is_set():
            return  # bytes after the reply's end: it was counted once already
        self._done.set()
        for owner, reservation in self._held:
            owner._settle(reservation, payload)

    def sent(self) -> None:
        return None

    def began(self) -> None:
        return None

    def complete(self, reply: Reply) -> None:
        self._end(llm_payload(self._canonical, reply, MAIN, None))

    def abandon(self, reply: Reply) -> None:
        """Ended unfinished: it was (partly) billed, so it counts at no less than its tokens'
        and its cost's reservation (the largest one held for it)."""
        tokens = max(reservation.tokens for _, reservation in self._held)
        payload = estimated_payload(self._canonical, reply, MAIN, tokens)
        held_cost = max(reservation.cost for _, reservation in self._held)
        if held_cost > float(payload["cost_usd"] or 0.0):
            payload["cost_usd"] = held_cost
        self._end(payload)

    def truncated(self, reply: Reply) -> None:
        self.abandon(reply)

    def unsent(self) -> None:
        self._end(None)
