"""A run as people look at it: why it waits, its attempts, and its spend as events land."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyrula.runtime import Event, RunRecord
from pyrula.runtime.runstore import PARKED, QUEUED, RUNNING, TERMINAL, lease_is_live


def waiting(run: RunRecord, now: float) -> str | None:
    """Why a run that could go on is not going on: no worker has (or had) claimed it. A worker
    claims only runs of workflows it imported, so the note names the workflow it needs."""
    if run.status == QUEUED:
        never = " (never claimed)" if run.attempt == 0 else ""
        return f"waiting for a worker that imports {run.name!r}{never}"
    if run.status == RUNNING and not lease_is_live(run.lease, now):
        return f"its worker is gone: waiting for a worker that imports {run.name!r}"
    return None


def answer_value(text: str) -> Any:
    """An answer typed by a person: JSON when it parses as JSON, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True, slots=True)
class Spend:
    """What a run has spent so far: metered model calls, tokens and dollars."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0

    def after(self, event: Event) -> Spend:
        """The spend once `event` is counted (`llm:done`, or a child's `child:spend`)."""
        payload = event.payload
        if event.type == "llm:done":
            return Spend(
                self.calls + 1,
                self.tokens + int(payload.get("total_tokens") or 0),
                self.cost_usd + float(payload.get("cost_usd") or 0.0),
            )
        if event.type == "child:spend":
            return Spend(
                self.calls,
                self.tokens + int(payload.get("total_tokens") or 0),
                self.cost_usd + float(payload.get("cost_usd") or 0.0),
            )
        return self


# Each cap an `@agent` may set, the `Spend` field it holds, and what its amounts count.
_CAPS = (
    ("max_llm_calls", "calls", "model calls"),
    ("max_total_tokens", "tokens", "tokens"),
    ("max_cost_usd", "cost_usd", "dollars"),
)


@dataclass(frozen=True, slots=True)
class CapUse:
    """One cap a run is held to and what the run has spent against it."""

    name: str  # the `AgentLimits` field: max_llm_calls, max_total_tokens or max_cost_usd
    spent: float
    cap: float
    unit: str  # "model calls", "tokens" or "dollars"

    @property
    def text(self) -> str:
        """The spend against the cap: `"2 of 5 model calls"`, `"$0.000300 of $1"`."""
        if self.unit == "dollars":
            return f"${self.spent:.6f} of ${self.cap:g}"
        return f"{self.spent:.0f} of {self.cap:g} {self.unit}"

    @property
    def percent(self) -> float:
        return 100.0 * self.spent / self.cap if self.cap else 100.0


def against_caps(run: RunRecord, spend: Spend) -> list[CapUse]:
    """`spend` against each cap the run's record keeps (an `@agent`'s `AgentLimits`, kept when
    it was submitted); a workflow's run has none."""
    kept = run.options.get("limits")
    caps = kept if isinstance(kept, dict) else {}
    return [
        CapUse(name, float(getattr(spend, attr)), float(caps[name]), unit)
        for name, attr, unit in _CAPS
        if isinstance(caps.get(name), int | float)
    ]


def spend_of(events: list[Event], start: Spend = Spend()) -> Spend:
    spend = start
    for event in events:
        spend = spend.after(event)
    return spend


@dataclass(slots=True)
class Attempt:
    """The events one attempt journaled (number 0: those before any worker took the run)."""

    number: int
    worker: str | None
    events: list[tuple[Event, Spend]] = field(default_factory=list)

    @property
    def ended_by(self) -> str:
        """How the attempt ended, as its last event says; a crash leaves no closing event."""
        if not self.events:
            return "no events"
        last = self.events[-1][0].type
        closing = {
            "run:done": "completed",
            "run:error": "failed",
            "run:cancelled": "cancelled",
            "run:parked": "parked",
        }
        return closing.get(last, "ended without a closing event (the worker died or is running)")


def attempts(events: list[Event], start: Spend = Spend()) -> list[Attempt]:
    """The events grouped by the attempt that wrote them, each with the run's spend after it."""
    groups = [Attempt(0, None)]
    spend = start
    for event in events:
        if event.type == "run:attempt":
            number = int(event.payload.get("attempt", 0))
            groups.append(Attempt(number, event.payload.get("worker")))
        spend = spend.after(event)
        groups[-1].events.append((event, spend))
    return [group for group in groups if group.events]


def finished(run: RunRecord) -> bool:
    """Whether the run has ended for good (completed, failed, cancelled, over budget)."""
    return run.status in TERMINAL


def pending_question(run: RunRecord, events: list[Event]) -> Event | None:
    """The `interrupt` a parked run waits on an answer to, if any (among `events`)."""
    if run.status != PARKED:
        return None
    asked = {e.payload.get("id"): e for e in events if e.type == "interrupt"}
    for event in events:
        if event.type == "interrupt:answer":
            asked.pop(event.payload.get("id"), None)
    return next(iter(asked.values()), None)
