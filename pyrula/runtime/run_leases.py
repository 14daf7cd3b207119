"""The run queue and its leases: a worker claims a runnable run under a fresh lease, keeps it
by heartbeats, and releases it (queued again) when it stops without an outcome.

A lease is fencing: each write made for an attempt checks it (`RunEvents.check_lease`). A run
passed over by a claim notes when it becomes claimable by itself (`next_due`).
"""

from __future__ import annotations

import json
import os
import time
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


class RunLeases(RunEvents):
    """Claiming, heartbeating and releasing runs (the store's `queue` table, the lease flags)."""

    next_due: float | None

    def claim(self, worker: str, ttl: float, names: set[str] | None = None) -> RunRecord | None:
        """Take the first runnable run under a fresh lease, or None.

        The queue is read without a lock; each candidate is then taken in a write scoped to
        its run, which checks it again: two workers racing for one run serialise on it, the
        loser moves on, and claims of different runs never wait on each other."""
        now = time.time()
        self.next_due = None
        with self.store.read() as txn:
            queued = [key for key, _ in txn.scan(self._queue)]
        for index in range(0, len(queued), 64):  # 64 queued runs' records per read
            with self.store.read() as txn:
                records = txn.get_many(queued[index : index + 64], db=self._runs)
            for key in queued[index : index + 64]:
                raw = records.get(key)
                if raw is None or not self._claimable(data := json.loads(raw), names, now):
                    continue
                if data["status"] == RUNNING:  # taken over: its facts still in a log go first
                    fact_log.recover(self.store)
                taken: RunRecord | None = self._take(key.decode(), worker, ttl, names)
                if taken is not None:
                    return taken
        return None

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

    def _take(self, run_id: str, worker: str, ttl: float, names: set[str] | None) -> Any:
        def write(txn: Txn) -> RunRecord | None:
            now = time.time()
            raw = txn.get(run_id.encode(), db=self._runs)
            if raw is None or txn.get(run_id.encode(), db=self._queue) is None:
                return None
            data = json.loads(bytes(raw))
            if not self._claimable(data, names, now):
                return None
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
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.put(lease_key(run.id), lease_value(worker, run.attempt), db=self._flags)
            return run

        return self.store.write(write, scope=(run_id,))

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
