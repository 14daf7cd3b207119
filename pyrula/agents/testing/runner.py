"""`AgentRunner`: run one agent or workflow in-process on a throwaway store, get its events.

Inside a test's cassette (`@pytest.mark.pyrula`, the `pyrula_cassette` fixture, or
`pyrula.cassette(...)`) the run's model calls come from that cassette: recorded there the first
time, replayed offline after. The run's own events stay in the runner's store.

`live_budget_usd` is the run's live budget: a model call it would send live past it is refused
before it is sent (`LiveBudgetExceeded`, and the run ends `budget_exceeded` unless the body
catches it); a replay spends nothing. `live_spend()` says what the last run sent live.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from pyrula.journal.store import Store, open_store
from pyrula.runtime import Definition, Event, LiveBudget, LiveSpend, Worker, submit


@dataclass(frozen=True, slots=True)
class Spend:
    """What a run's model calls cost, summed over its `llm:done` events."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class AgentRunner:
    """Run one agent or workflow to its end (or its first park) and hand back its events.

    `events = await AgentRunner(my_agent).run(...)` in async code, or
    `AgentRunner(my_agent).run_sync(...)` from a plain test; `events[-1].payload["result"]` is
    the result of a completed run (a parked run ends with its `run:parked` event). After a run,
    `model_calls()`, `spend()` and `tools_called()` read its events for a test's assertions."""

    def __init__(
        self,
        definition: Definition[..., Any],
        *,
        store: Store | str | os.PathLike[str] | None = None,
        live_budget_usd: float | None = None,
    ) -> None:
        self.definition = definition
        self.live_budget_usd = live_budget_usd
        self._live = LiveSpend()
        self.store = (
            store
            if isinstance(store, Store)
            else open_store(store or tempfile.mkdtemp(prefix="pyrula-runner-"))
        )
        self.run_id: str | None = None
        self.events: list[Event] = []

    def run_sync(self, *args: Any, **kwargs: Any) -> list[Event]:
        """`run` for code with no event loop of its own (it starts one, like `asyncio.run`)."""
        return asyncio.run(self.run(*args, **kwargs))

    async def run(self, *args: Any, **kwargs: Any) -> list[Event]:
        """Submit the run with these arguments and work it until nothing is left to do."""
        handle = submit(self.definition, *args, store=self.store, **kwargs)
        self.run_id = handle.id
        live = LiveBudget(
            self.live_budget_usd,
            name=f"AgentRunner({self.definition.name!r}) run {handle.id}",
            fix="raise AgentRunner(..., live_budget_usd=...)",
        )
        try:
            async with live:
                await Worker(self.store, poll_seconds=0.01).run(until_idle=True)
        finally:
            self._live = live.spent
        self.events = handle.events()
        return self.events

    def model_calls(self) -> list[dict[str, Any]]:
        """The `llm:done` payload of each model call of the last run, in order."""
        return [e.payload for e in self.events if e.type == "llm:done"]

    def spend(self) -> Spend:
        """The last run's model spend: calls, tokens and cost."""
        calls = self.model_calls()
        return Spend(
            calls=len(calls),
            input_tokens=sum(int(c.get("input_tokens") or 0) for c in calls),
            output_tokens=sum(int(c.get("output_tokens") or 0) for c in calls),
            cost_usd=sum(float(c.get("cost_usd") or 0.0) for c in calls),
        )

    def live_spend(self) -> Spend:
        """What the last run's model calls sent live cost (a replayed call spends nothing)."""
        live = self._live
        return Spend(live.calls, live.input_tokens, live.output_tokens, live.cost_usd)

    def tools_called(self) -> list[str]:
        """The name of each tool the last run called to its end, in order."""
        return [str(e.payload.get("name")) for e in self.events if e.type == "tool:done"]
