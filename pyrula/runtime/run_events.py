"""A run's event journal in the store: appending events, fenced by the attempt's lease, and
ending an attempt (`finish`); an outside fact delivered to a run (`deliver`).

A write made on behalf of an attempt carries a `Lease` and is fenced: if another worker has taken
the run over, it is refused with `RunAttemptEnded` before anything is changed, so a stale worker
can never interleave its events with the new owner's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pyrula.errors import RunAttemptEnded, RunNotFound
from pyrula.journal.store import Store, Txn
from pyrula.runtime.leases import lease_key, lease_value
from pyrula.runtime.records import (
    PARKED,
    TERMINAL,
    Event,
    Lease,
    RunRecord,
    dump_json,
    event_key,
    next_seq,
)
from pyrula.runtime.withheld import WithheldValues


class RunEvents(WithheldValues):
    """Appending to runs' event journals (the store's `events` table), fenced by leases."""

    store: Store
    _runs: Any
    _events: Any
    _queue: Any
    _flags: Any

    def _record(self, txn: Txn, run_id: str) -> RunRecord:
        raw = txn.get(run_id.encode(), db=self._runs)
        if raw is None:
            raise RunNotFound(f"no run {run_id!r} in {self.store.location}")
        return RunRecord.from_json(json.loads(bytes(raw)))

    def check_lease(self, txn: Txn, run_id: str, lease: Lease) -> None:
        """Refuse the write unless this attempt still holds the run's lease."""
        held = txn.get(lease_key(run_id), db=self._flags)
        if held is None or bytes(held) != lease_value(lease.worker, lease.attempt):
            raise RunAttemptEnded(
                f"run {run_id} attempt {lease.attempt} no longer holds its lease; "
                "another worker owns the run now"
            )

    def append(
        self,
        run_id: str,
        lease: Lease | None,
        kind: str,
        payload: dict[str, Any],
        *,
        withheld: dict[str, Any] | None = None,
    ) -> Event:
        """Append one event (fenced by `lease` when given) and commit it; `withheld` is kept
        apart, under the event's position, in the same commit (see `withheld`)."""
        fenced = self.fenced_append(run_id, lease, kind, payload, withheld)
        return self.store.write(fenced, scope=(run_id,))

    def fenced_append(
        self,
        run_id: str,
        lease: Lease | None,
        kind: str,
        payload: dict[str, Any],
        withheld: dict[str, Any] | None,
    ) -> Callable[[Txn], Event]:
        """`append` as a write function, for `Store.write` or a group commit."""

        def write(txn: Txn) -> Event:
            if lease is not None:
                self.check_lease(txn, run_id, lease)
            if withheld is not None:
                self._put_withheld(txn, run_id, str(payload["position"]), withheld)
            return self.append_in(txn, run_id, kind, payload)

        return write

    def append_in(self, txn: Txn, run_id: str, kind: str, payload: dict[str, Any]) -> Event:
        seq = next_seq(txn, self._events, run_id)
        return self._put_event(txn, run_id, seq, kind, payload, time.time())

    def _put_event(
        self,
        txn: Txn,
        run_id: str,
        seq: int,
        kind: str,
        payload: dict[str, Any],
        at: float,
    ) -> Event:
        event = Event(seq, kind, at, payload)
        txn.put(event_key(run_id, seq), dump_json(event.to_json()), db=self._events)
        return event

    def finish(
        self,
        run_id: str,
        lease: Lease,
        status: str,
        kind: str,
        payload: dict[str, Any],
        *,
        result: Any = None,
        error: dict[str, Any] | None = None,
        wake_at: float | None = None,
        withheld: dict[str, Any] | None = None,
        through: Callable[[Callable[[Txn], Event]], Event] | None = None,
    ) -> Event:
        """End an attempt: its closing event, the run's new status (and below `io` its withheld
        outcome) in one commit, made by `through` if given (`Attempt.commit`: its logged facts
        go in the same one)."""

        def write(txn: Txn) -> Event:
            self.check_lease(txn, run_id, lease)
            if withheld is not None:
                self._put_withheld(txn, run_id, "run", withheld)
            run = self._record(txn, run_id)
            event = self.append_in(txn, run_id, kind, payload)
            txn.delete(lease_key(run_id), db=self._flags)
            run.status = status
            run.lease = None
            run.updated_at = time.time()
            run.wake_at = wake_at
            if status in TERMINAL:
                run.result = result if run.capture == "io" else None
                run.error = error
                txn.delete(run_id.encode(), db=self._queue)
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.wake()  # parked or finished: a parent or a waiter may look again
            return event

        return through(write) if through else self.store.write(write, scope=(run_id,))

    def deliver(self, run_id: str, kind: str, payload: dict[str, Any]) -> Event:
        """Journal an outside fact for a run (an answer, a signal) and wake it if parked."""
        return self.store.write(
            lambda txn: self.deliver_in(txn, run_id, kind, payload), scope=(run_id,)
        )

    def deliver_in(self, txn: Txn, run_id: str, kind: str, payload: dict[str, Any]) -> Event:
        """`deliver` inside `txn` (a sending run's `signal:sent` goes in the same commit)."""
        raw = txn.get(run_id.encode(), db=self._runs)
        if raw is None:
            raise RunNotFound(f"no run {run_id!r} in {self.store.location}")
        run = RunRecord.from_json(json.loads(bytes(raw)))
        event = self.append_in(txn, run_id, kind, payload)
        if run.status == PARKED:
            run.wake_at = time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.wake()  # answered: claimable again
        return event
