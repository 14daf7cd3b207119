"""Workers: claim queued runs under a lease, heartbeat, execute one attempt, repeat.

A worker claims only runs of the workflows and agents its process has imported; others stay
queued for a worker that has them. A worker that dies (even by SIGKILL) leaves its lease behind;
the lease expires, or is seen dead at once when its process is gone on this host, and the next
worker resumes the run from its journal. A worker asked to stop (`stop()`, which `pyrula worker`
calls on Ctrl-C and SIGTERM) drains: it claims nothing more, gives the runs in flight a grace
period to end, then cancels the rest and releases their leases, so another worker resumes them
at once. Each run claimed, resumed, parked, ended or released is logged on `pyrula.worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyrula.errors import (
    BudgetExceeded,
    DurableInvocationCancelled,
    ReplayInputChanged,
    RunAttemptEnded,
    RunNotFound,
    StoreError,
    StoreFull,
    StoreUnavailable,
    WorkflowNotRegistered,
)
from pyrula.journal.async_store import acall
from pyrula.journal.store import Store, open_store
from pyrula.journal.wakeups import WAKE_FALLBACK_SECONDS
from pyrula.runtime import fact_log
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
from pyrula.runtime.registry import lookup, registered
from pyrula.runtime.retention import parse_duration, purge
from pyrula.runtime.runstore import Event, RunStore
from pyrula.runtime.worker_log import (
    fields,
    log,
    log_lost,
    log_run,
    log_store_down,
    store_down,
)

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt


@dataclass
class _Outcome:
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


def _failed(run: RunRecord, status: str, exc: BaseException) -> _Outcome:
    error = describe_error(exc, capture=run.capture)
    outcome = _Outcome(status, "run:error", {"error": error}, error=error)
    if run.capture != "io":
        outcome.withheld = {"error": describe_error(exc)}
    return outcome


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
        grace_seconds: float = 10.0,
        retention: float | str | None = None,
        purge_every: float = 3600.0,
    ) -> None:
        """`retention` (seconds, or `"30d"`): purge the runs that ended longer ago than that,
        when the worker starts and every `purge_every` seconds (see `pyrula.runtime.retention`);
        `None` keeps them."""
        self.store = store if isinstance(store, Store) else open_store(store)
        self.journal = RunStore(self.store)
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.names = names
        self.concurrency = concurrency
        self.grace_seconds = grace_seconds
        self._stopping = False
        self._release_now = asyncio.Event()
        # The bodies executing now, by run id, and the runs whose attempt the drain cancelled.
        self._bodies: dict[str, asyncio.Future[Any]] = {}
        self._attempts: dict[str, Attempt] = {}
        self._released: set[str] = set()
        self._cancelling = False  # past the grace period: an attempt not yet begun is released
        self.retention = parse_duration(retention) if retention is not None else None
        self.purge_every = purge_every
        self._purging: asyncio.Future[None] | None = None
        self._next_purge = 0.0

    def stop(self) -> None:
        """Stop claiming and drain; a second call releases the runs in flight at once."""
        if self._stopping:
            # Cancel at once; again on a later call, for a body that swallowed a cancellation.
            log.warning(
                "releasing %d run(s) now",
                len(self._bodies),
                extra=fields("releasing", in_flight=len(self._bodies)),
            )
            self._release_now.set()
            self._cancel_bodies()
            return
        self._stopping = True
        for attempt in self._attempts.values():
            attempt.draining = True  # each stops at its next boundary, well inside the grace
        log.warning(
            "draining: claiming no more runs; %d in flight get %gs to finish, then are released "
            "for another worker (stop again to release them now)",
            len(self._bodies),
            self.grace_seconds,
            extra=fields("draining", in_flight=len(self._bodies), grace_s=self.grace_seconds),
        )

    def claimable(self) -> frozenset[str]:
        """The workflow names this worker claims: those imported here (and in `names`, if set)."""
        known = registered()
        return known if self.names is None else known & frozenset(self.names)

    async def run(self, *, until_idle: bool = False, max_runs: int | None = None) -> int:
        """Work until stopped; returns how many attempts this worker executed."""
        with fact_log.kept_open(self.store):  # one fact log for all its runs (`fact_log`)
            return await self._work(until_idle, max_runs)

    async def _work(self, until_idle: bool, max_runs: int | None) -> int:
        executed = 0
        running: set[asyncio.Task[None]] = set()
        wake = self.store.wakeups()  # LISTEN/NOTIFY on PostgreSQL; None (poll) on LMDB
        if wake is not None:
            await wake.start()
        try:
            while not self._stopping and (max_runs is None or executed < max_runs):
                self._purge_when_due()
                run = None
                seen = wake.count if wake is not None else 0
                if len(running) < self.concurrency:
                    claim = (self.worker_id, self.lease_seconds, set(self.claimable()))
                    run = await acall(self.store, self.journal.claim, *claim)
                if run is None:
                    if until_idle and not running and not await acall(self.store, self._pending):
                        break
                    _, running = await _settle(running, self._idle_seconds(wake), wake, seen)
                    continue
                executed += 1
                running.add(asyncio.ensure_future(self.execute(run)))
            if self._stopping:
                running = await self._drain(running)
            while running:
                _, running = await _settle(running, None)
            if self._purging is not None:
                await self._purging
        finally:
            for task in running:
                task.cancel()
        return executed

    def _purge_when_due(self) -> None:
        """Start a purge on a thread when one is due and none is running (the runs in flight
        keep their heartbeats meanwhile)."""
        now = time.monotonic()
        if self.retention is None or now < self._next_purge:
            return
        if self._purging is not None and not self._purging.done():
            return
        self._next_purge = now + self.purge_every
        self._purging = asyncio.ensure_future(self._purge(self.retention))

    async def _purge(self, retention: float) -> None:
        try:
            purged = await asyncio.to_thread(purge, self.journal, retention)
        except StoreError as exc:
            log.warning("retention: purge failed (%s); trying again later", exc,
                        extra=fields("purge_failed", error=type(exc).__name__))
            return
        if purged.runs or purged.tokens:
            log.info(
                "retention: purged %d run(s) ended over %gs ago, %d expired token(s)",
                len(purged.runs), retention, purged.tokens,
                extra=fields("purged", runs=len(purged.runs), tokens=purged.tokens),
            )

    async def _drain(self, running: set[asyncio.Task[None]]) -> set[asyncio.Task[None]]:
        """Give the runs in flight the grace period (cut short by a second `stop()`), then cancel
        those still going: each releases its lease, its journal kept for the next worker."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace_seconds
        release = asyncio.ensure_future(self._release_now.wait())
        try:
            while running and not self._release_now.is_set():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                done, _ = await asyncio.wait(
                    {*running, release}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done & running:
                    task.result()
                running -= done
        finally:
            release.cancel()
        if self._bodies and not self._release_now.is_set():
            log.warning(
                "grace period over: releasing %d run(s) still in flight",
                len(self._bodies),
                extra=fields("releasing", in_flight=len(self._bodies)),
            )
        self._cancel_bodies()
        return running

    def _cancel_bodies(self) -> None:
        self._cancelling = True
        for run_id, body in list(self._bodies.items()):
            if body.cancel():
                self._released.add(run_id)

    def _idle_seconds(self, wake: Any) -> float:
        """How long to wait for work: the poll interval, or with wake-ups the long fallback,
        cut short when a passed-over run becomes claimable by itself (a timer, a lease)."""
        if wake is None:
            return self.poll_seconds
        due = self.journal.next_due
        until = due - time.time() if due is not None else WAKE_FALLBACK_SECONDS
        return max(self.poll_seconds, min(WAKE_FALLBACK_SECONDS, until))

    def _pending(self) -> bool:
        """Runs that another worker holds or that will wake soon still count as work; runs of
        workflows this worker has not imported do not."""
        now = time.time()
        names = self.claimable()
        for run in self.journal.runs():
            if run.status in TERMINAL or run.name not in names:
                continue
            if run.status == PARKED and not (run.wake_at and run.wake_at <= now + 5):
                continue
            return True
        return False

    async def execute(self, run: RunRecord) -> None:
        """One attempt at `run`, which this worker has just claimed."""
        assert run.lease is not None
        lease = Lease(self.worker_id, int(run.lease["attempt"]))
        started = time.monotonic()
        log_run("claimed" if lease.attempt == 1 else "resumed", run, lease)
        if self._cancelling:  # claimed just before the drain ended: hand it straight back
            await self._release(run, lease, started)
            return
        # Every store call of the worker's own is made through `acall`: off the loop (where
        # the worker's other runs go on) on PostgreSQL, in place on LMDB.
        store, journal = self.store, self.journal
        try:
            definition = lookup(run.name)
        except WorkflowNotRegistered as exc:
            error = describe_error(exc)
            finished = (run.id, lease, FAILED, "run:error", {"error": error})
            await acall(store, journal.finish, *finished, error=error)
            log_run(FAILED, run, lease, started, error)
            return
        if run.cancel_requested:
            await acall(store, journal.finish, run.id, lease, CANCELLED, "run:cancelled", {})
            log_run(CANCELLED, run, lease, started)
            return
        # An attempt's machinery (its session, the transport stack, the contexts) loads with
        # the first run this worker executes: a worker that finds none exits without it.
        from pyrula.runtime.attempt import Attempt, HandedOff, Park
        from pyrula.runtime.context import AgentContext, WorkflowContext, wake_if_signalled
        from pyrula.transport.core import pop_session, push_session

        events, data = await acall(store, _journaled_so_far, journal, run.id)
        attempt = Attempt(
            journal,
            run,
            lease,
            limits=definition.limits,
            is_agent=definition.kind == "agent",
            events=events,
        )
        begun = {"attempt": lease.attempt, "worker": self.worker_id}
        await attempt.awrite("run:attempt", begun)
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
        self._bodies[run.id] = task
        self._attempts[run.id] = attempt
        attempt.draining = self._stopping
        beat = asyncio.ensure_future(self._heartbeat(run.id, lease, task))
        try:
            try:
                result = await task
                outcome = _Outcome(COMPLETED, "run:done", {"result": result}, result=result)
                if run.capture != "io":
                    outcome.payload, outcome.withheld = {"result": None}, {"result": result}
            except HandedOff:
                await self._release(run, lease, started, attempt)  # at a boundary while draining
                return
            except Park as park:
                payload = {"reason": park.reason, **park.payload}
                outcome = _Outcome(
                    PARKED, "run:parked", payload, wake_at=park.wake_at, awaits=park.awaits
                )
            except DurableInvocationCancelled:
                outcome = _Outcome(CANCELLED, "run:cancelled", {})
            except BudgetExceeded as exc:
                outcome = _failed(run, BUDGET_EXCEEDED, exc)
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
                if run.id in self._released:
                    return
                raise
            except (Exception, ReplayInputChanged) as exc:  # the body's failure ends the run
                down = store_down(exc)
                if down is not None:
                    log_store_down(run, lease, down)
                    return  # the store's failure, not the run's: resumed once its lease lapses
                outcome = _failed(run, FAILED, exc)
            if run.id in self._released:  # the body swallowed the drain's cancellation
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
                    self.store, self.journal.finish, run.id, lease, outcome.status, outcome.kind,
                    outcome.payload, result=outcome.result, error=outcome.error,
                    wake_at=outcome.wake_at, withheld=outcome.withheld,
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
            self._bodies.pop(run.id, None)
            self._attempts.pop(run.id, None)
            self._released.discard(run.id)
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, RunAttemptEnded):
                await beat

    async def _release(
        self, run: RunRecord, lease: Lease, started: float, attempt: Attempt | None = None
    ) -> None:
        with contextlib.suppress(RunAttemptEnded):
            if attempt is not None:
                await acall(self.store, attempt.settle_facts)
            await acall(self.store, self.journal.release, run.id, lease)
            log_run("released", run, lease, started)

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
            began = time.time()
            try:
                await acall(self.store, self.journal.heartbeat, run_id, lease, self.lease_seconds)
            except RunAttemptEnded:
                task.cancel()
                raise
            attempt = self._attempts.get(run_id)
            if attempt is not None:  # the lease now lasts at least this long
                attempt.lease_deadline = began + self.lease_seconds


def _journaled_so_far(journal: RunStore, run_id: str) -> tuple[list[Event], dict[str, Any]]:
    """What an attempt starts from: the run's events so far, and its input."""
    return journal.events(run_id), journal.queued_input(run_id) or {}


async def _settle(
    running: set[asyncio.Task[None]], timeout: float | None, wake: Any = None, seen: int = 0
) -> tuple[set[asyncio.Task[None]], set[asyncio.Task[None]]]:
    """Wait a little for running attempts (or a wake-up); surface any crash of the worker's own
    machinery."""
    if wake is not None and timeout is not None:
        woken: asyncio.Task[None] = asyncio.ensure_future(wake.wait(seen, timeout))
        done, _ = await asyncio.wait({*running, woken}, return_when=asyncio.FIRST_COMPLETED)
        woken.cancel()
        done.discard(woken)
        for task in done:
            task.result()
        return done, running - done
    if not running:
        await asyncio.sleep(timeout or 0)
        return set(), set()
    done, pending = await asyncio.wait(
        running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
    )
    for task in done:
        task.result()
    return done, set(pending)
