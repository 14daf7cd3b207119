"""A run's children: starting one from its parent, and the parent reading the child's outcome.

Below the run client and the contexts both: `WorkflowContext.run_child` starts and awaits a child
here, the client (`fork`, a handle's `result`) reads a run's outcome here, and neither imports
the other.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from pyrula.errors import (
    DurableInvocationCancelled,
    RunExists,
    RunFailed,
    RunNotFound,
    StepFailed,
    WorkflowNotRegistered,
)
from pyrula.journal.async_store import acall
from pyrula.journal.wakeups import pause
from pyrula.runtime.failures import rebuild_error
from pyrula.runtime.registry import Definition, lookup
from pyrula.runtime.runstore import CANCELLED, COMPLETED, FAILED, TERMINAL, RunRecord

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt


def workflow_name(workflow: Definition[..., Any] | str) -> str:
    return workflow if isinstance(workflow, str) else workflow.name


def caps_of(workflow: Definition[..., Any] | str) -> dict[str, Any]:
    """The caps a run of `workflow` is held to, for its record (`{"limits": {...}}`): an
    `@agent`'s `AgentLimits`; nothing for a workflow, or for a name this process has not
    imported (its definition, and so its caps, are known only where it is imported)."""
    definition = workflow
    if isinstance(definition, str):
        try:
            definition = lookup(definition)
        except WorkflowNotRegistered:
            return {}
    caps = definition.limits.to_json() if definition.limits is not None else {}
    return {"limits": caps} if caps else {}


def outcome_of(record: RunRecord, withheld: dict[str, Any] | None = None) -> Any:
    """The run's result, or its failure raised; `withheld` is what a run below the io capture
    level kept apart (a parent run's replay reads its child's outcome from it)."""
    if withheld is not None:
        record = RunRecord.from_json(record.to_json())
        record.result = withheld.get("result")
        record.error = withheld.get("error", record.error)
    if record.status == COMPLETED:
        return record.result
    if record.status == CANCELLED:
        raise DurableInvocationCancelled(f"run {record.id} was cancelled")
    error = record.error or {}
    failure = rebuild_error(error) if error else None
    if failure is None or isinstance(failure, StepFailed):
        # Its class cannot be rebuilt here: say what it was, as Pyrula's own error.
        raise RunFailed(
            f"run {record.id} ended {record.status}: {error.get('type', '')}: "
            f"{error.get('message', '')}",
            status=record.status,
            error=error,
        )
    failure.add_note(f"raised by run {record.id}, which ended {record.status}")
    raise failure


def child_run_id(parent: str, position: str) -> str:
    """The id of the child run `parent` starts at `position` (`WorkflowContext.run_child`)."""
    return f"{parent}.{position.replace('/', '.')}"


def submit_child(
    attempt: Attempt,
    workflow: Definition[..., Any] | str,
    child_id: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    # An earlier attempt may have submitted it and died before journaling that it did.
    with contextlib.suppress(RunExists):
        attempt.run_store.submit(
            workflow_name(workflow),
            {"args": list(args), "kwargs": kwargs},
            run_id=child_id,
            capture=attempt.run.capture,
            options={"parent": attempt.run.id, **caps_of(workflow)},
        )


async def child_result(attempt: Attempt, child_id: str, poll_seconds: float = 0.05) -> Any:
    wake = attempt.run_store.store.wakeups()
    while True:
        seen = wake.count if wake is not None else 0
        ended = await acall(attempt.run_store.store, _child_ended, attempt, child_id)
        if ended is not None:
            return outcome_of(*ended)
        await pause(wake, seen, poll_seconds)


def _child_ended(attempt: Attempt, child_id: str) -> tuple[RunRecord, dict[str, Any] | None] | None:
    """One look at a child from its parent (on a store thread where the store is a server):
    None while it runs; once it ended, its record and what was kept apart of its outcome,
    its spend charged to the parent."""
    attempt.check_cancel()
    record = attempt.run_store.get(child_id)
    if record.status not in TERMINAL:
        return None
    _charge_parent(attempt, child_id)
    kept = None
    if record.capture != "io" and record.status in (COMPLETED, FAILED, "budget_exceeded"):
        with contextlib.suppress(RunNotFound):  # a child ended before values were kept
            kept = attempt.run_store.withheld(child_id, "run")
    return record, kept


def _charge_parent(attempt: Attempt, child_id: str) -> None:
    """Once per child: its whole spend (its own calls and its children's) becomes a `child:spend`
    fact of the parent, which the parent's token and cost caps count from then on."""
    position = f"spend:{child_id}"
    if attempt.facts.get(position) is not None:
        return
    tokens, cost = 0, 0.0
    for event in attempt.run_store.events(child_id):
        if event.type in ("llm:done", "child:spend"):
            tokens += int(event.payload.get("total_tokens", 0))
            cost += float(event.payload.get("cost_usd") or 0.0)
    attempt.write(
        "child:spend",
        {"position": position, "child": child_id, "total_tokens": tokens, "cost_usd": cost},
    )
