"""Workers: claim queued runs under a lease, execute an attempt at each, repeat (the claim loop).

A worker claims only runs of the workflows and agents its process has imported; others stay
queued for a worker that has them. A worker that dies (even by SIGKILL) leaves its lease behind;
the lease expires, or is seen dead at once when its process is gone on this host, and the next
worker resumes the run from its journal. A worker asked to stop (`stop()`, which `pyrula worker`
calls on Ctrl-C and SIGTERM) drains: it claims nothing more, gives the runs in flight a grace
period to end, then cancels the rest and releases their leases, so another worker resumes them
at once. Each run claimed, resumed, parked, ended or released is logged on `pyrula.worker`.

Here is the claim loop (and the retention purge it starts when due); one attempt is
`worker_attempt.py`, the drain `worker_drain.py`, the log `worker_log.py`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from typing import Any, cast

from pyrula.errors import StoreError
from pyrula.journal.async_store import acall
from pyrula.journal.store import Store, open_store
from pyrula.journal.wakeups import WAKE_FALLBACK_SECONDS
from pyrula.runtime import fact_log
from pyrula.runtime.records import PARKED, TERMINAL, RunRecord
from pyrula.runtime.registry import registered
from pyrula.runtime.renamed import Renamed
from pyrula.runtime.retention import parse_duration, purge
from pyrula.runtime.runstore import RunStore
from pyrula.runtime.worker_attempt import Executor
from pyrula.runtime.worker_drain import InFlight
from pyrula.runtime.worker_log import fields, log


class Worker:
    """Runs queued runs from a store until stopped (or, with `until_idle`, until none is left).

    `store` is the journal `Store` it works from, `run_store` the `RunStore` (the runs in it)."""

    journal: Renamed[RunStore] = Renamed("run_store")  # deprecated (issue 39)

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
        self.run_store = RunStore(self.store)
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.names = names
        self.concurrency = concurrency
        self._in_flight = InFlight(grace_seconds)
        self.retention = parse_duration(retention) if retention is not None else None
        self.purge_every = purge_every
        self._purging: asyncio.Future[None] | None = None
        self._next_purge = 0.0

    @property
    def grace_seconds(self) -> float:
        """How long a draining worker gives the runs in flight before releasing them."""
        return self._in_flight.grace_seconds

    @grace_seconds.setter
    def grace_seconds(self, seconds: float) -> None:
        self._in_flight.grace_seconds = seconds

    def stop(self) -> None:
        """Stop claiming and drain; a second call releases the runs in flight at once."""
        self._in_flight.stop()

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
            while not self._in_flight.stopping and (max_runs is None or executed < max_runs):
                self._purge_when_due()
                runs: list[RunRecord] = []
                seen = wake.count if wake is not None else 0
                free = self.concurrency - len(running)
                if max_runs is not None:
                    free = min(free, max_runs - executed)
                if free > 0:  # as many runs as it has room for, in one write
                    claim = (self.worker_id, self.lease_seconds, set(self.claimable()))
                    runs = await acall(self.store, self.run_store.claim_many, *claim, free)
                if not runs:
                    if until_idle and not running and not await acall(self.store, self._pending):
                        break
                    # Full, it waits for a run to end (or a stop): a wake-up, which every
                    # worker gets for every run queued or ended, is only for one with room.
                    listen = wake if free > 0 else None
                    stopped = self._in_flight.stopped
                    idle = self._idle_seconds(wake)
                    _, running = await _settle(running, idle, listen, seen, stopped)
                    continue
                executed += len(runs)
                running.update(asyncio.ensure_future(self.execute(run)) for run in runs)
            if self._in_flight.stopping:
                running = await self._in_flight.drain(running)
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
            purged = await asyncio.to_thread(purge, self.run_store, retention)
        except StoreError as exc:
            log.warning(
                "retention: purge failed (%s); trying again later",
                exc,
                extra=fields("purge_failed", error=type(exc).__name__),
            )
            return
        if purged.runs or purged.tokens:
            log.info(
                "retention: purged %d run(s) ended over %gs ago, %d expired token(s)",
                len(purged.runs),
                retention,
                purged.tokens,
                extra=fields("purged", runs=len(purged.runs), tokens=purged.tokens),
            )

    async def execute(self, run: RunRecord) -> None:
        """One attempt at `run`, which this worker has just claimed (`worker_attempt.py`)."""
        settings = (self.store, self.run_store, self.worker_id, self.lease_seconds)
        await Executor(*settings, self._in_flight).execute(run)

    def _idle_seconds(self, wake: Any) -> float:
        """How long to wait for work: the poll interval, or with wake-ups the long fallback,
        cut short when a passed-over run becomes claimable by itself (a timer, a lease)."""
        if wake is None:
            return self.poll_seconds
        due = self.run_store.next_due
        until = due - time.time() if due is not None else WAKE_FALLBACK_SECONDS
        return max(self.poll_seconds, min(WAKE_FALLBACK_SECONDS, until))

    def _pending(self) -> bool:
        """Runs that another worker holds or that will wake soon still count as work; runs of
        workflows this worker has not imported do not."""
        now = time.time()
        names = self.claimable()
        for run in self.run_store.runs():
            if run.status in TERMINAL or run.name not in names:
                continue
            if run.status == PARKED and not (run.wake_at and run.wake_at <= now + 5):
                continue
            return True
        return False


async def _settle(
    running: set[asyncio.Task[None]],
    timeout: float | None,
    wake: Any = None,
    seen: int = 0,
    stopped: asyncio.Event | None = None,
) -> tuple[set[asyncio.Task[None]], set[asyncio.Task[None]]]:
    """Wait a little for running attempts (or a wake-up, or `stopped`); surface any crash of
    the worker's own machinery."""
    waiters: set[asyncio.Future[Any]] = set()
    if wake is not None and timeout is not None:
        waiters.add(asyncio.ensure_future(wake.wait(seen, timeout)))
    if stopped is not None and running:
        waiters.add(asyncio.ensure_future(stopped.wait()))
    if not running and not waiters:
        await asyncio.sleep(timeout or 0)
        return set(), set()
    done, _ = await asyncio.wait(
        {*running, *waiters},
        timeout=None if wake is not None else timeout,
        return_when=asyncio.FIRST_COMPLETED,
    )
    for waiter in waiters:
        waiter.cancel()
    done -= waiters
    for task in done:
        task.result()
    return cast(set[asyncio.Task[None]], done), running - done
