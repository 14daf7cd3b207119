"""One attempt at a run a worker claimed: its body executed under the lease (heartbeats keep
it), then its outcome journaled with the run's new status, or its lease handed back.

An attempt ends completed, parked, cancelled or failed (`Outcome`), or with no outcome: lost (a
heartbeat found the run taken over, or the store is down) or released by the drain
(`worker_drain.py`), when the next worker resumes it from its journal at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyrula.errors import (
    BudgetExceeded,
    DurableInvocationCancelled,
    ReplayInputChanged,
    RunAttemptEnded,
    RunNotFound,
    StoreFull,
    StoreUnavailable,
    WorkflowNotRegistered,
)
from pyrula.journal.async_store import acall
from pyrula.journal.store import Store
from pyrula.runtime.calls import running
from pyrula.runtime.failures import describe_error
from pyrula.runtime.records import (
    BUDGET_EXCEEDED,
    CANCELLED,
    COMPLETED,
    FAILED,
    PARKED,
    TERMINAL,
    Lease,
    RunRecord,
)
from pyrula.runtime.registry import lookup
from pyrula.runtime.runstore import Event, RunStore
from pyrula.runtime.worker_drain import InFlight
from pyrula.runtime.worker_log import log_lost, log_run, log_store_down, store_down

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt


@dataclass
class Outcome:
    """How an attempt ended, and what its closing event and the run record say."""

    status: str
    kind: str
    payload: dict[str, Any]
    result: Any = None
    error: dict[str, Any] | None = None
    wake_at: float | None = None
    # Below the io capture level: the result or whole failure, kept apart (`RunStore.withheld`).
    withheld: dict[str, Any] | None = None
    awaits: tuple[str, int] | None = None  # parked on a signal wait (`Park.awaits`)


def failed(run: RunRecord, status: str, exc: BaseException) -> Outcome:
    error = describe_error(exc, capture=run.capture)
    outcome = Outcome(status, "run:error", {"error": error}, error=error)
    if run.capture != "io":
        outcome.withheld = {"error": describe_error(exc)}
    return outcome


@dataclass(frozen=True)
class Executor:
    """What executing an attempt needs of its worker (made per attempt, from the worker's
    settings as they are then)."""

    store: Store
    run_store: RunStore
    worker_id: str
    lease_seconds: float
    in_flight: InFlight

    async def execute(self, run: RunRecord) -> None:
        """One attempt at `run`, which the worker has just claimed."""
        assert run.lease is not None
        lease = Lease(self.worker_id, int(run.lease["attempt"]))
        started = time.monotonic()
        log_run("claimed" if lease.attempt == 1 else "resumed", run, lease)
        if self.in_flight.cancelling:  # claimed just before the drain ended: hand it straight back
            await self._release(run, lease, started)
            return
        # Every store call of the worker's own is made through `acall`: off the loop (where
        # the worker's other runs go on) on PostgreSQL, in place on LMDB.
        store, run_store = self.store, self.run_store
        try:
            definition = lookup(run.name)
        except WorkflowNotRegistered as exc:
            error = describe_error(exc)
            finished = (run.id, lease, FAILED, "run:error", {"error": error})
            await acall(store, run_store.finish, *finished, error=error)
            log_run(FAILED, run, lease, started, error)
            return
        if run.cancel_requested:
            await acall(store, run_store.finish, run.id, lease, CANCELLED, "run:cancelled", {})
            log_run(CANCELLED, run, lease, started)
            return
        # An attempt's machinery (its session, the transport stack, the contexts) loads with
        # the first run this worker executes: a worker that finds none exits without it.
        from pyrula.runtime.attempt import Attempt, HandedOff, Park
        from pyrula.runtime.context import AgentContext, WorkflowContext, wake_if_signalled
        from pyrula.transport.core import pop_session, push_session

        events, data = await acall(store, _journaled_so_far, run_store, run.id)
        attempt = Attempt(
            run_store,
            run,
            lease,
            limits=definition.limits,
            is_agent=definition.kind == "agent",
            events=events,
        )
        begun = {"attempt": lease.attempt, "worker": self.worker_id}
        try:
            await attempt.awrite("run:attempt", begun)
        except RunAttemptEnded:  # its lease ran out before its first write got in
            log_lost(run, lease)
            return
        except (StoreFull, StoreUnavailable) as exc:
            log_store_down(run, lease, exc)
            return
        context_cls = AgentContext if definition.kind == "agent" else WorkflowContext
        ctx = context_cls(attempt)
        args, kwargs = data.get("args", []), data.get("kwargs", {})

        async def body() -> Any:
            # This task's context only: threads started without it do not see the run.
            session = push_session(attempt.session, process_wide=False)
            try:
                with running(attempt), attempt.executing():
                    return await definition.fn(ctx, *args, **kwargs)
            finally:
                pop_session(attempt.session, session)

        task = asyncio.ensure_future(body())
        self.in_flight.enter(run.id, task, attempt)
        beat = asyncio.ensure_future(self._heartbeat(run.id, lease, task))
        try:
            try:
                result = await task
                outcome = Outcome(COMPLETED, "run:done", {"result": result}, result=result)
                if run.capture != "io":
                    outcome.payload, outcome.withheld = {"result": None}, {"result": result}
            except HandedOff:
                await self._release(run, lease, started, attempt)  # at a boundary while draining
                return
            except Park as park:
                payload = {"reason": park.reason, **park.payload}
                outcome = Outcome(
                    PARKED, "run:parked", payload, wake_at=park.wake_at, awaits=park.awaits
                )
            except DurableInvocationCancelled:
                outcome = Outcome(CANCELLED, "run:cancelled", {})
            except BudgetExceeded as exc:
                outcome = failed(run, BUDGET_EXCEEDED, exc)
            except RunAttemptEnded:
                log_lost(run, lease)
                return
            except asyncio.CancelledError:
                if beat.done() and isinstance(beat.exception(), RunAttemptEnded):
                    log_lost(run, lease)  # a heartbeat found the run taken over
                    return
                # Cancelled by the drain, or with the worker itself: no outcome is written; the
                # lease goes back so the next worker resumes the run from its journal at once.
                await self._release(run, lease, started, attempt)
                if run.id in self.in_flight.released:
                    return
                raise
            except (Exception, ReplayInputChanged) as exc:  # the body's failure ends the run
                down = store_down(exc)
                if down is not None:
                    log_store_down(run, lease, down)
                    return  # the store's failure, not the run's: resumed once its lease lapses
                outcome = failed(run, FAILED, exc)
            if run.id in self.in_flight.released:  # the body swallowed the drain's cancellation
                await self._release(run, lease, started, attempt)
                return
            # A call still open (a stream the body left unread) is metered once now, before the
            # closing event; nothing about it is written after that.
            with contextlib.suppress(RunAttemptEnded):
                await acall(store, attempt.session.close, meter=True)
            if outcome.status in TERMINAL:
                await acall(store, self._close_children, attempt)
            try:
                await acall(  # off the loop on PostgreSQL: the worker's other runs go on
                    self.store,
                    self.run_store.finish,
                    run.id,
                    lease,
                    outcome.status,
                    outcome.kind,
                    outcome.payload,
                    result=outcome.result,
                    error=outcome.error,
                    wake_at=outcome.wake_at,
                    withheld=outcome.withheld,
                    through=attempt.commit,  # with the facts it logged, in the same commit
                )
            except RunAttemptEnded:
                log_lost(run, lease)
                return
            except (StoreFull, StoreUnavailable) as exc:
                log_store_down(run, lease, exc)
                return
            if outcome.awaits is not None:
                await acall(store, wake_if_signalled, attempt, *outcome.awaits)
            log_run(outcome.status, run, lease, started, outcome.error)
        finally:
            attempt.session.close(meter=False)  # lost or released: the next attempt meters
            attempt.release_facts()
            self.in_flight.leave(run.id)
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, RunAttemptEnded):
                await beat

    async def _release(
        self, run: RunRecord, lease: Lease, started: float, attempt: Attempt | None = None
    ) -> None:
        with contextlib.suppress(RunAttemptEnded):
            if attempt is not None:
                await acall(self.store, attempt.settle_facts)
            await acall(self.store, self.run_store.release, run.id, lease)
            log_run("released", run, lease, started)

    def _close_children(self, attempt: Attempt) -> None:
        """Apply each uncollected child's parent_close policy before the parent's terminal:
        `cancel` asks it to stop at its next boundary, `terminate` ends it at once, `abandon`
        leaves it running. A crash in between is repaired when the parent's replay ends again."""
        for child_id, policy in attempt.open_children.items():
            with contextlib.suppress(RunNotFound):
                if policy == "cancel":
                    self.run_store.request_cancel(child_id)
                elif policy == "terminate":
                    self.run_store.terminate(child_id)

    async def _heartbeat(self, run_id: str, lease: Lease, task: asyncio.Future[Any]) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            began = time.time()
            try:
                await acall(self.store, self.run_store.heartbeat, run_id, lease, self.lease_seconds)
            except RunAttemptEnded:
                task.cancel()
                raise
            attempt = self.in_flight.attempts.get(run_id)
            if attempt is not None:  # the lease now lasts at least this long
                attempt.lease_deadline = began + self.lease_seconds


def _journaled_so_far(run_store: RunStore, run_id: str) -> tuple[list[Event], dict[str, Any]]:
    """What an attempt starts from: the run's events so far, and its input."""
    return run_store.events(run_id), run_store.queued_input(run_id) or {}
