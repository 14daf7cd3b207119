"""Submitting runs and driving them from outside: await, cancel, answer, resume, fork."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

from pyrula.errors import RunError, RunNotFound
from pyrula.journal.async_store import acall
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import run_key
from pyrula.journal.store import Store, open_store
from pyrula.journal.wakeups import pause
from pyrula.runtime.children import caps_of, child_run_id, outcome_of, workflow_name
from pyrula.runtime.registry import Definition
from pyrula.runtime.renamed import Renamed
from pyrula.runtime.retention import Purged, parse_duration
from pyrula.runtime.retention import purge as purge_ended
from pyrula.runtime.runstore import (
    FAILED,
    PARKED,
    QUEUED,
    TERMINAL,
    Event,
    RunRecord,
    RunStore,
)

StoreLike = Store | str | os.PathLike[str] | None


def _run_store(store: StoreLike) -> RunStore:
    return RunStore(store if isinstance(store, Store) else open_store(store))


@dataclass
class RunHandle:
    """A submitted run: read its state, its events, or wait for its result (`run_store` is the
    `RunStore` it was submitted to)."""

    id: str
    run_store: RunStore
    created: bool = True
    journal: ClassVar[Renamed[RunStore]] = Renamed("run_store")  # deprecated (issue 39)

    @property
    def record(self) -> RunRecord:
        return self.run_store.get(self.id)

    def events(self) -> list[Event]:
        return self.run_store.events(self.id)

    async def wait(self, poll_seconds: float = 0.05, *, until_parked: bool = False) -> RunRecord:
        wake = self.run_store.store.wakeups()
        while True:
            seen = wake.count if wake is not None else 0
            record = await acall(self.run_store.store, self.run_store.get, self.id)
            if record.status in TERMINAL or (until_parked and record.status == PARKED):
                return record
            await pause(wake, seen, poll_seconds)

    async def result(self, poll_seconds: float = 0.05) -> Any:
        """The run's result once it completes; raises if it was cancelled or failed."""
        record = await self.wait(poll_seconds)
        return outcome_of(record)


def submit(
    workflow: Definition[..., Any] | str,
    *args: Any,
    store: StoreLike = None,
    run_id: str | None = None,
    idempotency_key: str | None = None,
    token_ttl: float = 24 * 3600,
    capture: str = "io",
    **kwargs: Any,
) -> RunHandle:
    """Queue a run of `workflow(ctx, *args, **kwargs)`; a worker on the same store executes it.

    Under an `idempotency_key` a second submission attaches to the first run (and a different
    input raises `IdempotencyConflict`); without one, reusing a `run_id` raises `RunExists`.
    An `@agent`'s caps are kept in the run's record (`options["limits"]`) for people to read.
    """
    if capture not in ("io", "metadata"):
        raise ValueError("capture must be 'io' (inputs and results kept) or 'metadata'")
    run_store = _run_store(store)
    record, created = run_store.submit(
        workflow_name(workflow),
        {"args": list(args), "kwargs": kwargs},
        run_id=run_id,
        idempotency_key=idempotency_key,
        token_ttl=token_ttl,
        capture=capture,
        options=caps_of(workflow),
    )
    return RunHandle(record.id, run_store, created)


def cancel(run_id: str, *, store: StoreLike = None) -> RunRecord:
    """Ask a run to stop; it is observed at the body's next boundary (or before it starts)."""
    return _run_store(store).request_cancel(run_id)


def answer(run_id: str, value: Any, *, store: StoreLike = None) -> Event:
    """Answer the question a run is parked on; the run is queued to resume."""
    run_store = _run_store(store)
    record = run_store.get(run_id)
    events = run_store.events(run_id)
    asked = [e.payload["id"] for e in events if e.type == "interrupt"]
    answered = {e.payload.get("id") for e in events if e.type == "interrupt:answer"}
    pending = [i for i in asked if i not in answered]
    if record.status != PARKED or not pending:
        raise RunError(f"run {run_id} is not waiting for an answer (status {record.status})")
    return run_store.deliver(run_id, "interrupt:answer", {"id": pending[0], "answer": value})


def signal(run_id: str, name: str, payload: Any = None, *, store: StoreLike = None) -> Event:
    """Send a signal to a run from outside."""
    return _run_store(store).deliver(run_id, "signal", {"name": name, "payload": payload})


def resume(run_id: str, *, store: StoreLike = None) -> RunRecord:
    """Queue a parked run now, or a failed one again (its journaled work replays)."""
    run_store = _run_store(store)
    record = run_store.get(run_id)
    if record.status == PARKED:
        return run_store.update(run_id, wake_at=0.0)
    if record.status in (FAILED, "budget_exceeded"):
        if record.capture != "io":
            raise RunError(f"run {run_id} kept no input (capture={record.capture}); resubmit it")
        run_store.requeue(run_id, record.input)
        return run_store.get(run_id)
    raise RunError(f"run {run_id} is {record.status}; only parked or failed runs resume")


_REPLAYED_FACTS = frozenset(
    {
        "step:done",
        "step:error",
        "tool:done",
        "tool:error",
        "llm:done",
        "sleep",
        "interrupt",
        "interrupt:answer",
        "signal",
        "signal:sent",
        "child:started",
        "emit",
    }
)


def fork(run_id: str, at_seq: int, *, store: StoreLike = None) -> RunHandle:
    """A new run of the same workflow and input that replays `run_id`'s journal up to event
    `at_seq` and goes live from there (a what-if branch). A child run started by then is forked
    too, whole: the new run's child replays what the source's did, paying for nothing again."""
    run_store = _run_store(store)
    new_id = f"run_{uuid.uuid4().hex[:20]}"
    _fork_into(run_store, run_store.get(run_id), at_seq, new_id)
    return RunHandle(new_id, run_store)


def _fork_into(
    run_store: RunStore,
    source: RunRecord,
    at_seq: int | None,
    new_id: str,
    parent: str | None = None,
) -> None:
    """Submit `new_id`, seeded with the facts of run `source` up to `at_seq` (all of them: None)
    and its recorded model calls, after a fork of each child those facts started (`parent`: the
    fork's parent)."""
    run_id = source.id
    data = run_store.queued_input(run_id) or source.input
    if data is None:
        raise RunError(f"run {run_id} kept no input (capture={source.capture}); cannot fork it")
    events = run_store.events(run_id)
    if at_seq is None:
        at_seq = events[-1].seq if events else 0
    seeds = []
    for event in events:
        if event.seq > at_seq or event.type not in _REPLAYED_FACTS:
            continue
        payload = event.payload
        if event.type == "child:started":
            child = _fork_child(run_store, payload, new_id)
            if child is None:
                continue  # gone (purged): the fork starts a child of its own
            payload = {**payload, "child": child}
        seeds.append((event.type, payload))
    exchanges = Exchanges(run_store.store)
    for kind, payload in seeds:
        position = payload.get("position")
        if kind == "llm:done" and isinstance(position, str):
            scope, _, index = position.rpartition("/llm")
            exchanges.copy(run_key(run_id, scope, int(index)), run_key(new_id, scope, int(index)))
    options = {k: v for k, v in source.options.items() if k == "limits"}
    if parent is not None:
        options["parent"] = parent
    run_store.submit(
        source.name,
        data,
        run_id=new_id,
        capture=source.capture,
        options=options,
        forked_from={"run": run_id, "at_seq": at_seq},
        seed_events=seeds,
        seed_withheld={
            str(payload["position"]): run_store.withheld(run_id, str(payload["position"]))
            for _kind, payload in seeds
            if payload.get("withheld")
        },
    )


def _fork_child(run_store: RunStore, started: dict[str, Any], parent: str) -> str | None:
    """Fork the child a `child:started` fact names, all its events, as the child `parent` starts
    at the same position; its id, or None when the source's child is gone."""
    try:
        source = run_store.get(str(started["child"]))
    except RunNotFound:
        return None
    child = child_run_id(parent, str(started["position"]))
    _fork_into(run_store, source, None, child, parent=parent)
    return child


def purge(older_than: float | str, *, store: StoreLike = None, dry_run: bool = False) -> Purged:
    """Delete the runs that ended more than `older_than` ago (seconds, or `"30d"`, `"12h"`)
    with their children, and the idempotency tokens past their TTL; `dry_run` only lists them.
    A queued, running or parked run is never touched (`pyrula runs purge`)."""
    return purge_ended(_run_store(store), parse_duration(older_than), dry_run=dry_run)


__all__ = [
    "QUEUED",
    "RunHandle",
    "answer",
    "cancel",
    "fork",
    "outcome_of",
    "purge",
    "resume",
    "signal",
    "submit",
]
