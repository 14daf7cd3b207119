"""Runs in the store: their records, their event journals, the queue, leases and idempotency.

Every fact is one committed write transaction. Writes made on behalf of an attempt carry a
`Lease` and are fenced: if another worker has taken the run over, the write is refused with
`RunAttemptEnded` before anything is changed, so a stale worker can never interleave its events
with the new owner's.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pyrula.errors import IdempotencyConflict, RunAttemptEnded, RunExists, RunNotFound
from pyrula.journal.group_read import group_read
from pyrula.journal.store import Store, Txn
from pyrula.runtime import fact_log
from pyrula.runtime.cancel_flags import cancel_key, cancels_asked
from pyrula.runtime.leases import HOST, lease_key, lease_value
from pyrula.runtime.leases import lease_is_live as lease_is_live  # re-exported
from pyrula.runtime.purging import RunPurging, purged_record
from pyrula.runtime.records import (
    BUDGET_EXCEEDED,
    CANCELLED,
    COMPLETED,
    FAILED,
    PARKED,
    QUEUED,
    RUNNING,
    SEQ,
    TERMINAL,
    Event,
    Lease,
    RunRecord,
    dump_json,
    event_key,
    input_digest,
    next_seq,
)
from pyrula.runtime.withheld import WithheldValues


class RunStore(RunPurging, WithheldValues):
    """The runs, events, queue and tokens databases of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._runs = store.db("runs")
        self._events = store.db("events")
        self._queue = store.db("queue")
        self._tokens = store.db("tokens")
        # Small keys read on every step: who holds each run's lease, which runs are cancelled.
        self._flags = store.db("flags")
        self.next_due: float | None = None  # see `_due`
        # What a run's events leave out below the `io` capture level and its replay still needs:
        # read by the runtime only, never by `runs show` or an export, purged with the run.
        self._withheld = store.db("withheld")
        fact_log.recover(store, again=False, quiet=True)  # a stopped worker's (`fact_log`)

    # -- reading ------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord:
        with self.store.read() as txn:
            value = txn.get(run_id.encode(), db=self._runs)
        if value is None:
            raise RunNotFound(f"no run {run_id!r} in {self.store.location}")
        return RunRecord.from_json(json.loads(bytes(value)))

    def find(self, run_id: str) -> RunRecord | None:
        try:
            return self.get(run_id)
        except RunNotFound:
            return None

    def runs(self, *, after: str | None = None) -> Iterator[RunRecord]:
        """Every run in id order (past the run `after` if given: a page's cursor)."""
        start = None if after is None else after.encode()
        for _key, value in self.store.iter_prefix(self._runs, b"", after=start):
            yield RunRecord.from_json(json.loads(value))

    def events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """The run's events past seq `after`, in order (at most `limit` of them if given)."""
        prefix = run_id.encode() + b"\x00"
        start = prefix + SEQ.pack(after + 1)
        found: list[Event] = []
        with self.store.read() as txn:
            for _key, value in txn.scan(self._events, prefix, start=start):
                found.append(Event.from_json(json.loads(value)))
                if limit is not None and len(found) >= limit:
                    break
        return found

    # -- submitting -----------------------------------------------------------------------------

    def submit(
        self,
        name: str,
        input: Any,
        *,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        token_ttl: float = 24 * 3600,
        capture: str = "io",
        options: dict[str, Any] | None = None,
        forked_from: dict[str, Any] | None = None,
        seed_events: list[tuple[str, dict[str, Any]]] | None = None,
        seed_withheld: dict[str, dict[str, Any]] | None = None,
    ) -> tuple[RunRecord, bool]:
        """Queue a run; returns (record, created). A known token re-attaches to its run. A fork
        passes its source's facts as `seed_events`, and what they withheld as `seed_withheld`."""
        digest = input_digest({"name": name, "input": input})
        new_id = run_id or f"run_{uuid.uuid4().hex[:20]}"

        def write(txn: Txn) -> tuple[RunRecord, bool]:
            now = time.time()
            if idempotency_key is not None:
                held = txn.get(idempotency_key.encode(), db=self._tokens)
                if held is not None:
                    token = json.loads(bytes(held))
                    if token["expires"] > now:
                        if token["digest"] != digest:
                            raise IdempotencyConflict(
                                f"idempotency key {idempotency_key!r} was used for run "
                                f"{token['run_id']} with a different input; use a new key for "
                                "new work"
                            )
                        existing = txn.get(token["run_id"].encode(), db=self._runs)
                        if existing is not None:
                            return RunRecord.from_json(json.loads(bytes(existing))), False
                        if "purged" in token:  # the run outlived its retention, not its token
                            return purged_record(token, idempotency_key, capture), False
            if txn.get(new_id.encode(), db=self._runs) is not None:
                raise RunExists(
                    f"run {new_id!r} already exists; pass idempotency_key= to re-attach to it "
                    "on purpose, or use a new run id"
                )
            record = RunRecord(
                id=new_id,
                name=name,
                input=input if capture == "io" else None,
                status=QUEUED,
                created_at=now,
                updated_at=now,
                token=idempotency_key,
                capture=capture,
                options=options or {},
                forked_from=forked_from,
            )
            if idempotency_key is not None:
                token = {"run_id": new_id, "digest": digest, "expires": now + token_ttl}
                txn.put(idempotency_key.encode(), dump_json(token), db=self._tokens)
            txn.put(new_id.encode(), dump_json(record.to_json()), db=self._runs)
            txn.put(new_id.encode(), dump_json({"input": input}), db=self._queue)
            facts = [("run:submitted", {"name": name}), *(seed_events or [])]
            for seq, (kind, payload) in enumerate(facts, start=1):
                self._put_event(txn, new_id, seq, kind, payload, now)
            for position, value in (seed_withheld or {}).items():
                self._put_withheld(txn, new_id, position, value)
            txn.wake()  # a run is queued
            return record, True

        return self.store.write(write, scope=(new_id, f"token:{idempotency_key}"))

    def queued_input(self, run_id: str) -> Any:
        """The run's input, kept with its queue entry even when capture drops it from the run."""
        with self.store.read() as txn:
            value = txn.get(run_id.encode(), db=self._queue)
        return json.loads(bytes(value))["input"] if value is not None else None

    # -- leases ---------------------------------------------------------------------------------

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

    def check_lease(self, txn: Txn, run_id: str, lease: Lease) -> None:
        """Refuse the write unless this attempt still holds the run's lease."""
        held = txn.get(lease_key(run_id), db=self._flags)
        if held is None or bytes(held) != lease_value(lease.worker, lease.attempt):
            raise RunAttemptEnded(
                f"run {run_id} attempt {lease.attempt} no longer holds its lease; "
                "another worker owns the run now"
            )

    def _record(self, txn: Txn, run_id: str) -> RunRecord:
        raw = txn.get(run_id.encode(), db=self._runs)
        if raw is None:
            raise RunNotFound(f"no run {run_id!r} in {self.store.location}")
        return RunRecord.from_json(json.loads(bytes(raw)))

    def request_cancel(self, run_id: str) -> RunRecord:
        """Mark a run cancelled-on-request; a parked run is woken so it can end."""

        def write(txn: Txn) -> RunRecord:
            run = self._record(txn, run_id)
            if run.status in TERMINAL:
                return run
            run.cancel_requested = True
            if run.status == PARKED:
                run.wake_at = 0.0
            run.updated_at = time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.put(cancel_key(run_id), b"1", db=self._flags)
            txn.wake()  # a cancel is requested
            return run

        return self._write_cancel(run_id, write)

    def terminate(self, run_id: str) -> RunRecord:
        """End a run now, as cancelled, whoever runs it: removing its lease fences the attempt
        still executing out of every further write."""

        def write(txn: Txn) -> RunRecord:
            run = self._record(txn, run_id)
            if run.status in TERMINAL:
                return run
            self.append_in(txn, run_id, "run:cancelled", {"terminated": True})
            run.status, run.lease, run.cancel_requested = CANCELLED, None, True
            run.updated_at = time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.put(cancel_key(run_id), b"1", db=self._flags)
            txn.delete(lease_key(run_id), db=self._flags)
            txn.delete(run_id.encode(), db=self._queue)
            txn.wake()  # a parent may wait on it
            return run

        return self._write_cancel(run_id, write)

    def _write_cancel(self, run_id: str, write: Callable[[Txn], RunRecord]) -> RunRecord:
        """Commit `write` (it sets the run's cancel flag), then count a cancel asked here."""
        try:
            return self.store.write(write, scope=(run_id,))
        finally:
            cancels_asked.bump()

    def cancel_requested(self, run_id: str) -> bool:
        with self.store.read() as txn:
            return txn.get(cancel_key(run_id), db=self._flags) is not None

    async def acancel_requested(self, run_id: str) -> bool:
        """`cancel_requested` from the event loop: the worker's runs share one read."""
        return await group_read(self.store).get(cancel_key(run_id), db=self._flags) is not None

    # -- journaling -----------------------------------------------------------------------------

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

    def update(self, run_id: str, **changes: Any) -> RunRecord:
        """Change fields of a run outside any attempt (cancel, answer, wake)."""

        def write(txn: Txn) -> RunRecord:
            raw = txn.get(run_id.encode(), db=self._runs)
            if raw is None:
                raise RunNotFound(f"no run {run_id!r} in {self.store.location}")
            run = RunRecord.from_json(json.loads(bytes(raw)))
            for name, value in changes.items():
                setattr(run, name, value)
            run.updated_at = time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            return run

        return self.store.write(write, scope=(run_id,))

    def requeue(self, run_id: str, input: Any) -> None:
        """Queue an ended run again (its journaled work replays on the next attempt)."""

        def write(txn: Txn) -> None:
            raw = txn.get(run_id.encode(), db=self._runs)
            if raw is None:
                raise RunNotFound(f"no run {run_id!r} in {self.store.location}")
            run = RunRecord.from_json(json.loads(bytes(raw)))
            run.status, run.error, run.updated_at = QUEUED, None, time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.put(run_id.encode(), dump_json({"input": input}), db=self._queue)
            self.append_in(txn, run_id, "run:resumed", {})
            txn.wake()  # a run is queued

        self.store.write(write, scope=(run_id,))

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


__all__ = [
    "BUDGET_EXCEEDED",
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "HOST",
    "PARKED",
    "QUEUED",
    "RUNNING",
    "TERMINAL",
    "Event",
    "Lease",
    "RunRecord",
    "RunStore",
    "lease_is_live",
]
