"""The run queue and its leases: a worker claims a runnable run under a fresh lease, keeps it
by heartbeats, and releases it (queued again) when it stops without an outcome.

A lease is fencing: each write made for an attempt checks it (`RunEvents.check_lease`). A run
passed over by a claim notes when it becomes claimable by itself (`next_due`).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from typing import Any

from pyrula.journal.store import Txn
from pyrula.runtime import fact_log
from pyrula.runtime.leases import HOST, lease_is_live, lease_key, lease_value
from pyrula.runtime.records import (
    PARKED,
    QUEUED,
    RUNNING,
    TERMINAL,
    Lease,
    RunRecord,
    dump_json,
)
from pyrula.runtime.run_events import RunEvents

# A claim that skipped a run another write held looks again after this long at the latest.
BUSY_RETRY_SECONDS = 0.05
# The queued runs a claim reads at a time: their keys, then their records in slices (a claim
# for a few runs decodes a few records, not the page's).
CLAIM_PAGE = 64
CLAIM_SLICE = 16


class RunLeases(RunEvents):
    """Claiming, heartbeating and releasing runs (the store's `queue` table, the lease flags)."""

    next_due: float | None

    def claim(self, worker: str, ttl: float, names: set[str] | None = None) -> RunRecord | None:
        """Take one runnable run under a fresh lease, or None (`claim_many`)."""
        taken = self.claim_many(worker, ttl, names, limit=1)
        return taken[0] if taken else None

    def claim_many(
        self, worker: str, ttl: float, names: set[str] | None = None, limit: int = 1
    ) -> list[RunRecord]:
        """Take up to `limit` runnable runs under fresh leases, in one write per batch.

        The queue is read without a lock, a page at a time from a random place in it
        (`_queue_pages`), so workers that look at once start apart. Each batch of candidates
        is then taken in one write that locks them without waiting (`Txn.try_lock`) and checks
        them again: a run another worker is taking is skipped, not waited for (and looked at
        again shortly, `next_due`), and claims of different runs never wait on each other."""
        now = time.time()
        self.next_due = None
        taken: list[RunRecord] = []
        for page in self._queue_pages():
            for chunk in _slices(page, max(limit, CLAIM_SLICE)):
                taken += self._claim_from(chunk, worker, ttl, names, limit - len(taken), now)
                if len(taken) >= limit:
                    return taken
        return taken

    def _claim_from(
        self,
        chunk: list[bytes],
        worker: str,
        ttl: float,
        names: set[str] | None,
        limit: int,
        now: float,
    ) -> list[RunRecord]:
        """Up to `limit` runs taken of those queued under `chunk`'s keys."""
        taken: list[RunRecord] = []
        with self.store.read() as txn:
            records = txn.get_many(chunk, db=self._runs)
        candidates: list[str] = []
        for key in chunk:
            raw = records.get(key)
            if raw is None or not self._claimable(data := json.loads(raw), names, now):
                continue
            if data["status"] == RUNNING:  # taken over: its facts still in a log go first
                fact_log.recover(self.store)
            candidates.append(key.decode())
        while candidates and len(taken) < limit:
            batch = candidates[: limit - len(taken)]
            del candidates[: len(batch)]
            taken += self._take(batch, worker, ttl, names)
        return taken

    def _queue_pages(self) -> Iterator[list[bytes]]:
        """The queue's keys, a page at a time: from a random place in it to its end, then from
        its start up to that place. Each read is one page of keys (no values), so a claim costs
        the same whatever the queue's length; the place is drawn where default run ids fall."""
        middle = f"run_{random.getrandbits(80):020x}".encode()
        for start, below in ((middle, None), (b"", middle)):
            while True:
                with self.store.read() as txn:
                    page = txn.keys(self._queue, start=start, limit=CLAIM_PAGE)
                if below is not None:
                    page = [key for key in page if key < below]
                if page:
                    yield page
                if len(page) < CLAIM_PAGE:
                    break
                start = page[-1] + b"\x00"

    def _claimable(self, run: dict[str, Any], names: set[str] | None, now: float) -> bool:
        status, wake_at = run["status"], run.get("wake_at")
        if (names is not None and run["name"] not in names) or status in TERMINAL:
            return False
        if status == PARKED and not (wake_at is not None and wake_at <= now):
            self._due(wake_at)
            return False
        if status == RUNNING and lease_is_live(run.get("lease"), now):
            self._due((run.get("lease") or {}).get("expires"))
            return False
        return True

    def _take(
        self, run_ids: list[str], worker: str, ttl: float, names: set[str] | None
    ) -> list[RunRecord]:
        def write(txn: Txn) -> list[RunRecord]:
            now = time.time()
            mine = txn.try_lock(run_ids)
            if len(mine) < len(run_ids):  # another write holds the rest: look again soon
                self._due(now + BUSY_RETRY_SECONDS)
            keys = [run_id.encode() for run_id in mine]
            records = txn.get_many(keys, db=self._runs)
            queued = txn.get_many(keys, db=self._queue)
            taken = []
            for key in keys:
                raw = records.get(key)
                if raw is None or key not in queued:
                    continue
                data = json.loads(raw)
                if not self._claimable(data, names, now):
                    continue
                run = RunRecord.from_json(data)
                run.attempt += 1
                run.status = RUNNING
                run.wake_at = None
                run.lease = {
                    "worker": worker,
                    "host": HOST,
                    "pid": os.getpid(),
                    "expires": now + ttl,
                    "attempt": run.attempt,
                }
                run.updated_at = now
                txn.put(key, dump_json(run.to_json()), db=self._runs)
                txn.put(lease_key(run.id), lease_value(worker, run.attempt), db=self._flags)
                taken.append(run)
            return taken

        # Scoped to no name: its runs are locked by `try_lock`, which never waits.
        return self.store.write(write, scope=[])

    def _due(self, at: float | None) -> None:
        """Note the earliest time a run passed over by `claim` becomes claimable by itself (a
        timer, an expiring lease): nothing notifies then, so a waiting worker looks again."""
        if at is not None and (self.next_due is None or at < self.next_due):
            self.next_due = at

    def heartbeat(self, run_id: str, lease: Lease, ttl: float) -> None:
        def write(txn: Txn) -> None:
            self.check_lease(txn, run_id, lease)
            run = self._record(txn, run_id)
            assert run.lease is not None
            run.lease["expires"] = time.time() + ttl
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)

        self.store.write(write, scope=(run_id,))

    def release(self, run_id: str, lease: Lease) -> RunRecord:
        """End an attempt with no outcome (its worker is shutting down): the run is queued
        again, claimable at once by any worker, its journal as it was. A lost lease raises
        `RunAttemptEnded`."""

        def write(txn: Txn) -> RunRecord:
            self.check_lease(txn, run_id, lease)
            run = self._record(txn, run_id)
            self.append_in(txn, run_id, "run:released", {"attempt": lease.attempt})
            txn.delete(lease_key(run_id), db=self._flags)
            run.status, run.lease, run.updated_at = QUEUED, None, time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.wake()  # claimable again
            return run

        return self.store.write(write, scope=(run_id,))


def _slices(keys: list[bytes], size: int) -> Iterator[list[bytes]]:
    for index in range(0, len(keys), size):
        yield keys[index : index + size]
