"""Workers: claim queued runs under a lease, heartbeat, execute one attempt, repeat.

A worker that dies (even by SIGKILL) leaves its lease behind; the lease expires, or is seen dead
at once when its process is gone on this host, and the next worker resumes the run from its
journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pyrula.errors import (
    BudgetExceeded,
    DurableInvocationCancelled,
    ReplayInputChanged,
    RunAttemptEnded,
    RunNotFound,
    WorkflowNotRegistered,
)
from pyrula.journal.store import Store, open_store
from pyrula.runtime.attempt import Attempt, Park, bind_run, current_attempt, describe_error
from pyrula.runtime.context import AgentContext, WorkflowContext
from pyrula.runtime.journal import (
    BUDGET_EXCEEDED,
    CANCELLED,
    COMPLETED,
    FAILED,
    PARKED,
    TERMINAL,
    Lease,
    RunJournal,
    RunRecord,
)
from pyrula.runtime.registry import lookup
from pyrula.transport.core import pop_session, push_session

log = logging.getLogger("pyrula.worker")


@dataclass
class _Outcome:
    """How an attempt ended, and what its closing event and the run record say."""

    status: str
    kind: str
    payload: dict[str, Any]
    result: Any = None
    error: dict[str, Any] | None = None
    wake_at: float | None = None


class Worker:
    """Runs queued runs from a store until stopped (or, with `until_idle`, until none is left)."""

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        lease_seconds: float = 15.0,
        poll_seconds: float = 0.1,
        worker_id: str | None = None,
        names: set[str] | None = None,
        concurrency: int = 8,
    ) -> None:
        self.store = store if isinstance(store, Store) else open_store(store)
        self.journal = RunJournal(self.store)
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.names = names
        self.concurrency = concurrency
        self._stopping = False

    def stop(self) -> None:
        self._stopping = True

    async def run(self, *, until_idle: bool = False, max_runs: int | None = None) -> int:
        """Work until stopped; returns how many attempts this worker executed."""
        executed = 0
        running: set[asyncio.Task[None]] = set()
        try:
            while not self._stopping and (max_runs is None or executed < max_runs):
                run = None
                if len(running) < self.concurrency:
                    run = self.journal.claim(self.worker_id, self.lease_seconds, self.names)
                if run is None:
                    if until_idle and not running and not self._pending():
                        break
                    _, running = await _settle(running, self.poll_seconds)
                    continue
                executed += 1
                running.add(asyncio.ensure_future(self.execute(run)))
            while running:
                _, running = await _settle(running, None)
        finally:
            for task in running:
                task.cancel()
        return executed

    def _pending(self) -> bool:
        """Runs that another worker holds or that will wake soon still count as work."""
        now = time.time()
        for run in self.journal.runs():
            if run.status in TERMINAL or (self.names is not None and run.name not in self.names):
                continue
            if run.status == PARKED and not (run.wake_at and run.wake_at <= now + 5):
                continue
            return True
        return False

    async def execute(self, run: RunRecord) -> None:
        """One attempt at `run`, which this worker has just claimed."""
        assert run.lease is not None
        lease = Lease(self.worker_id, int(run.lease["attempt"]))
        try:
            definition = lookup(run.name)
        except WorkflowNotRegistered as exc:
            self.journal.finish(
                run.id,
                lease,
                FAILED,
                "run:error",
                {"error": describe_error(exc)},
                error=describe_error(exc),
            )
            return
        if run.cancel_requested:
            self.journal.finish(run.id, lease, CANCELLED, "run:cancelled", {}, error=None)
            return
        attempt = Attempt(
            self.journal, run, lease, limits=definition.limits, is_agent=definition.kind == "agent"
        )
        attempt.write("run:attempt", {"attempt": lease.attempt, "worker": self.worker_id})
        context_cls = AgentContext if definition.kind == "agent" else WorkflowContext
        ctx = context_cls(attempt)
        data = self.journal.queued_input(run.id) or {}
        args, kwargs = data.get("args", []), data.get("kwargs", {})

        async def body() -> Any:
            current_attempt.set(attempt)
            # This task's context only: threads started without it do not see the run.
            session = push_session(attempt, process_wide=False)
            bind_run(+1)
            try:
                return await definition.fn(ctx, *args, **kwargs)
            finally:
                bind_run(-1)
                pop_session(attempt, session)

        task = asyncio.ensure_future(body())
        beat = asyncio.ensure_future(self._heartbeat(run.id, lease, task))
        try:
            try:
                result = await task
                outcome = _Outcome(COMPLETED, "run:done", {"result": result}, result=result)
                if run.capture != "io":
                    outcome.payload = {"result": None}
            except Park as park:
                payload = {"reason": park.reason, **park.payload}
                outcome = _Outcome(PARKED, "run:parked", payload, wake_at=park.wake_at)
            except DurableInvocationCancelled:
                outcome = _Outcome(CANCELLED, "run:cancelled", {})
            except BudgetExceeded as exc:
                error = describe_error(exc)
                outcome = _Outcome(BUDGET_EXCEEDED, "run:error", {"error": error}, error=error)
            except RunAttemptEnded:
                log.warning("run %s attempt %s lost its lease", run.id, lease.attempt)
                return
            except asyncio.CancelledError:
                if beat.done() and isinstance(beat.exception(), RunAttemptEnded):
                    return
                raise
            except (Exception, ReplayInputChanged) as exc:  # the body's failure ends the run
                error = describe_error(exc)
                if run.capture != "io":
                    error = {"type": error["type"]}
                outcome = _Outcome(FAILED, "run:error", {"error": error}, error=error)
            if outcome.status in TERMINAL:
                self._close_children(attempt)
            with contextlib.suppress(RunAttemptEnded):
                self.journal.finish(
                    run.id,
                    lease,
                    outcome.status,
                    outcome.kind,
                    outcome.payload,
                    result=outcome.result,
                    error=outcome.error,
                    wake_at=outcome.wake_at,
                )
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, RunAttemptEnded):
                await beat

    def _close_children(self, attempt: Attempt) -> None:
        """Apply each uncollected child's parent_close policy before the parent's terminal:
        `cancel` asks it to stop at its next boundary, `terminate` ends it at once, `abandon`
        leaves it running. A crash in between is repaired when the parent's replay ends again."""
        for child_id, policy in attempt.open_children.items():
            with contextlib.suppress(RunNotFound):
                if policy == "cancel":
                    self.journal.request_cancel(child_id)
                elif policy == "terminate":
                    self.journal.terminate(child_id)

    async def _heartbeat(self, run_id: str, lease: Lease, task: asyncio.Future[Any]) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                self.journal.heartbeat(run_id, lease, self.lease_seconds)
            except RunAttemptEnded:
                task.cancel()
                raise


async def _settle(
    running: set[asyncio.Task[None]], timeout: float | None
) -> tuple[set[asyncio.Task[None]], set[asyncio.Task[None]]]:
    """Wait a little for running attempts; surface any crash of the worker's own machinery."""
    if not running:
        await asyncio.sleep(timeout or 0)
        return set(), set()
    done, pending = await asyncio.wait(
        running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
    )
    for task in done:
        task.result()
    return done, set(pending)
