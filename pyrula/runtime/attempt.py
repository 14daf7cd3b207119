"""One attempt at running a run's body: its lease, the facts journaled so far, its positions.

A run's body re-executes from the top on every attempt. Each durable operation takes the next
position in its replay scope (see `pyrula.runtime.positions`); a position with a journaled
outcome returns that outcome instead of doing the work again. The attempt's model calls go
through its transport session (`pyrula.runtime.session`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pyrula.errors import (
    DurableInvocationCancelled,
    RunAttemptEnded,
    StoreError,
    UnjournaledSurface,
)
from pyrula.journal.group_commit import GroupCommit, group_commit
from pyrula.journal.store import Txn
from pyrula.journal.wakeups import Wakeups
from pyrula.runtime import fact_log
from pyrula.runtime.calls import current_run
from pyrula.runtime.cancel_flags import cancels_asked
from pyrula.runtime.fact_log import FactLog, LoggedFact
from pyrula.runtime.grouped_append import append_grouped
from pyrula.runtime.leases import lease_value
from pyrula.runtime.limits import AgentLimits, Budget
from pyrula.runtime.positions import Positions
from pyrula.runtime.renamed import Renamed
from pyrula.runtime.runstore import Event, Lease, RunRecord, RunStore
from pyrula.runtime.session import RunSession

T = TypeVar("T")
# How old a cancel check's "nothing announced since" may be before the flag is read again.
CANCEL_RECHECK_SECONDS = 0.25


def _nothing(txn: Txn) -> None:
    """`Attempt.logged_facts` where nothing is logged."""


class Park(BaseException):
    """Unwinds the body when the run must wait (an interrupt, a long sleep, a signal)."""

    def __init__(
        self,
        reason: str,
        payload: dict[str, Any],
        wake_at: float | None = None,
        awaits: tuple[str, int] | None = None,
    ):
        self.reason = reason
        self.payload = payload
        self.wake_at = wake_at
        self.awaits = awaits  # a signal wait: the signal's name and which of them (0 the first)
        super().__init__(reason)


class HandedOff(BaseException):
    """Unwinds the body at its next boundary while its worker drains: the run goes back to the
    queue, its journal intact, for another worker to resume."""


class Attempt:
    """The state of one attempt; its `session` is the transport `Session` of the run, its
    `run_store` the `RunStore` it journals to."""

    journal: Renamed[RunStore] = Renamed("run_store")  # deprecated (issue 39)

    def __init__(
        self,
        run_store: RunStore,
        run: RunRecord,
        lease: Lease,
        *,
        limits: AgentLimits | None = None,
        is_agent: bool = False,
        events: Iterable[Event] | None = None,
    ) -> None:
        """`events`: the run's events so far, when the caller has read them (the worker does,
        off the event loop); else they are read here."""
        self.run_store = run_store
        self.run = run
        # Set by a draining worker: the next boundary hands the run to another worker.
        self.draining = False
        self.lease = lease
        self.is_agent = is_agent
        self.budget = Budget(limits)
        self.loop_thread = threading.get_ident()
        try:  # the worker builds an attempt on the loop its body runs on
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._lock = threading.Lock()
        self._positions = Positions()
        self.facts: dict[str, Event] = {}
        self.open_children: dict[str, str] = {}
        self.by_type: dict[str, list[Event]] = defaultdict(list)
        self.last_seq = 0  # of the events this attempt has read or written
        # When the lease lapses unless renewed (the worker's heartbeat moves it on).
        self.lease_deadline = float((run.lease or {}).get("expires") or 0.0)
        self._lease_value = lease_value(lease.worker, lease.attempt)
        # The facts `awrite` has journaled, when the last was, and the log it appends them to
        # while the run executes alone (`fact_log`), made on first use where the store has one.
        self._facts_written = 0
        self._last_fact_at = time.monotonic()
        self._logs_facts = fact_log.folder_of(run_store.store) is not None
        self._fact_log: FactLog | None = None
        self._executing = False  # counted on its loop's group commit (`executing`)
        self._group: GroupCommit | None = None
        # Before the last cancel check that found none (PostgreSQL): the wake-up count, this
        # process's own cancels, the time.
        self._quiet_since: tuple[int, int, float] | None = None
        # The store's commit count (LMDB) before the last cancel check that found none.
        self._quiet_commits: int | None = None
        # The wake-ups of the loop the body runs on (None on LMDB, or built off any loop).
        self._wake: Wakeups | None = run_store.store.wakeups() if self._loop is not None else None
        for event in run_store.events(run.id) if events is None else events:
            self._learn(event)
        self.session = RunSession(self)

    def _learn(self, event: Event) -> None:
        self.by_type[event.type].append(event)
        self.last_seq = max(self.last_seq, event.seq)
        position = event.payload.get("position")
        if isinstance(position, str):
            self.facts[position] = event
        if event.type == "llm:done":
            self.budget.replayed(event.payload)
        elif event.type == "child:spend":
            self.budget.child_spent(event.payload)

    def remember(self, events: Iterable[Event]) -> None:
        """Learn events written for this attempt outside `write` (with a model call's exchange)."""
        with self._lock:
            for event in events:
                self._learn(event)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the run's body runs on: a sync caller on a thread of the run waits
        for a rate-limit slot through it (see `pyrula.runtime.ratelimit`)."""
        return self._loop

    # -- positions and facts -------------------------------------------------------------------

    def next_position(self, kind: str) -> str:
        return self._positions.next(current_run().scope.name, kind)

    def write(
        self, kind: str, payload: dict[str, Any], *, withheld: dict[str, Any] | None = None
    ) -> Event:
        """Journal a fact of this attempt (fenced by its lease; with the facts it has logged)
        and remember it; `withheld` is what the event leaves out and its replay needs
        (`RunStore.withheld`)."""
        run_store, run_id = self.run_store, self.run.id
        event = self.commit(run_store.fenced_append(run_id, self.lease, kind, payload, withheld))
        self.remember([event])
        return event

    async def awrite(
        self, kind: str, payload: dict[str, Any], *, withheld: dict[str, Any] | None = None
    ) -> Event:
        """`write` from the run's event loop, group-committed with the facts the worker's other
        runs journal meanwhile (one flush for all); returns once the fact is durable: committed,
        or appended to the fact log while the run executes alone (`fact_log`)."""
        facts = self._fact_log_for_next()
        if facts is not None:
            event = Event(self.last_seq + 1, kind, time.time(), payload)
            facts.append(LoggedFact.of(self.run.id, self._lease_value, event, withheld))
            self.remember([event])
            # As a commit's wait would: the loop's other tasks (the heartbeat, the claims, a run
            # starting) get their turn, and one that starts ends this run's logging.
            await asyncio.sleep(0)
            return event
        self.settle_facts()
        event = await append_grouped(
            self.run_store,
            self.run.id,
            self.lease,
            kind,
            payload,
            next_seq=self.last_seq + 1,
            withheld=withheld,
        )
        self.remember([event])
        return event

    def _fact_log_for_next(self) -> FactLog | None:
        """The log the next fact goes to, or None to commit it: not one of the attempt's first
        `DIRECT_FACTS`, nor one long after the last (it would be put in the store alone), nor
        near the lease's end, nor while other runs execute on the loop (their group commit
        shares its flushes already, and a fold would hold them up)."""
        now = time.monotonic()
        since, self._last_fact_at = now - self._last_fact_at, now
        self._facts_written += 1
        if not self._logs_facts or self._facts_written <= fact_log.DIRECT_FACTS:
            return None
        if (
            since > fact_log.FOLD_SECONDS
            or self.lease_deadline - time.time() < fact_log.LEASE_MARGIN
        ):
            return None
        if self._group is None:  # the loop's, which the attempt keeps to its end
            self._group = group_commit(self.run_store.store)
        if self._group.runs - (1 if self._executing else 0):
            return None  # other runs execute on the loop
        if self._fact_log is None:
            self._fact_log = fact_log.for_store(self.run_store.store)
        if self._fact_log is not None:
            self._refuse_if_fenced(self._fact_log)
        return self._fact_log

    def settle_facts(self) -> None:
        """Put this attempt's logged facts in the store: before any other write of it, so its
        events stay in order. A lost lease raises `RunAttemptEnded`."""
        facts = self._fact_log
        if facts is not None:
            if facts.holds(self.run.id):
                facts.fold()
            self._refuse_if_fenced(facts)

    def commit(self, write: Callable[[Txn], T], *, also: tuple[str, ...] = ()) -> T:
        """Commit `write` (a write of this attempt, fenced by its own lease check) with the facts
        it has logged, first, in one transaction; `also` names other runs `write` writes to."""
        scope = tuple(dict.fromkeys((self.run.id, *also)))
        with self.logged_facts() as put:
            return self.run_store.store.write(lambda txn: (put(txn), write(txn))[1], scope=scope)

    @contextmanager
    def logged_facts(self) -> Iterator[Callable[[Txn], None]]:
        """For a write of this attempt made some other way (a model call's, with its exchange):
        what to call first inside its transaction, so the facts it has logged go in with it."""
        facts = self._fact_log
        if facts is not None and facts.holds(self.run.id):
            with facts.folding() as put:
                yield put
        else:
            yield _nothing

    def release_facts(self) -> None:
        """The attempt is over: put what it logged in the store (a failure is logged: the facts
        stay on disk for the next opener) and let go of the log."""
        facts, self._fact_log = self._fact_log, None
        if facts is not None:
            try:
                fact_log.release(facts)
            except StoreError as exc:
                fact_log.log.error("run %s: its logged facts wait on disk: %s", self.run.id, exc)

    def _refuse_if_fenced(self, facts: FactLog) -> None:
        if facts.refused(self.run.id, self._lease_value):
            raise RunAttemptEnded(
                f"run {self.run.id} attempt {self.lease.attempt} no longer holds its lease; "
                "another worker owns the run now"
            )

    @contextmanager
    def executing(self) -> Iterator[None]:
        """Around the body: counts the run on its loop's group commit, which commits on the
        loop's own thread while a single run executes there (`journal.group_commit`)."""
        with group_commit(self.run_store.store).executing():
            self._executing = True
            try:
                yield
            finally:
                self._executing = False

    def check_cancel(self) -> None:
        """A boundary: stop here if the run was cancelled, or handed off by a draining worker."""
        if self.draining:
            raise HandedOff(f"run {self.run.id}: its worker is draining; handed to the next one")
        if self.run_store.cancel_requested(self.run.id):
            raise DurableInvocationCancelled(f"run {self.run.id} was cancelled")

    async def acheck_cancel(self) -> None:
        """`check_cancel` from the run's event loop, which it leaves free meanwhile: on
        PostgreSQL the checks of the worker's runs share one round trip (`journal.group_read`),
        and a check is skipped while no cancel can have been asked since the last one found
        none (`_no_cancel_since_last_check`)."""
        if self.draining:
            raise HandedOff(f"run {self.run.id}: its worker is draining; handed to the next one")
        if self._no_cancel_since_last_check():
            return
        wake = self._wake
        before = None
        if wake is not None and wake.live:
            before = (wake.count, cancels_asked.value, time.monotonic())
        commits = self.run_store.store.commit_count()
        if await self.run_store.acancel_requested(self.run.id):
            raise DurableInvocationCancelled(f"run {self.run.id} was cancelled")
        self._quiet_since, self._quiet_commits = before, commits

    def _no_cancel_since_last_check(self) -> bool:
        """On PostgreSQL a cancel is announced (NOTIFY) in its own transaction, and the loop's
        listener counts every announcement. So where, since before the last read that found no
        cancel, that count has not moved on a listener that stayed up throughout (a reconnect
        moves it) and this process has asked for no cancel itself (its own announcement may
        not have reached the listener yet), no cancel can be seen yet: the read is skipped (a
        round trip per step). It is still made at least every `CANCEL_RECHECK_SECONDS`, so a
        listening connection that died without an error cannot hide a cancel for longer.

        On LMDB a cancel is a commit, and every commit moves the store's commit count: while it
        has not moved since before the last read that found no cancel (a run whose facts go to
        the fact log commits nothing between its steps), the read is skipped too."""
        commits = self._quiet_commits
        if commits is not None and commits == self.run_store.store.commit_count():
            return True
        quiet, wake = self._quiet_since, self._wake
        return (
            quiet is not None
            and wake is not None
            and wake.live
            and wake.count == quiet[0]
            and cancels_asked.value == quiet[1]
            and time.monotonic() - quiet[2] < CANCEL_RECHECK_SECONDS
        )

    def refuse_loop_thread(self) -> None:
        """A sync model call must not run on the run's own loop thread: it would block the run,
        and its reply could not be journaled in order."""
        if threading.get_ident() == self.loop_thread:
            raise UnjournaledSurface(
                "a sync model client was called on the run's own event loop thread, where it "
                "would block the run and cannot be journaled; call it through "
                "`await ctx.to_thread(fn)` (or `asyncio.to_thread`), or use the async client"
            )
