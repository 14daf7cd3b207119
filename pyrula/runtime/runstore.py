"""Runs in the store: their records, their event journals, the queue, leases and idempotency.

Every fact is one committed write transaction. Writes made on behalf of an attempt carry a
`Lease` and are fenced: if another worker has taken the run over, the write is refused with
`RunAttemptEnded` before anything is changed, so a stale worker can never interleave its events
with the new owner's.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import lmdb

from pyrula.errors import (
    IdempotencyConflict,
    RunAttemptEnded,
    RunExists,
    RunNotFound,
)
from pyrula.fingerprints import canonical_json
from pyrula.journal.group_commit import group_commit
from pyrula.journal.store import Store

_SEQ = struct.Struct(">Q")
HOST = socket.gethostname()

QUEUED, RUNNING, PARKED = "queued", "running", "parked"
COMPLETED, FAILED, CANCELLED, BUDGET_EXCEEDED = (
    "completed",
    "failed",
    "cancelled",
    "budget_exceeded",
)
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED, BUDGET_EXCEEDED})


@dataclass(frozen=True, slots=True)
class Event:
    """One journaled fact of a run, in order."""

    seq: int
    type: str
    at: float
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "at": self.at, "payload": self.payload}


@dataclass(frozen=True, slots=True)
class Lease:
    worker: str
    attempt: int


@dataclass
class RunRecord:
    id: str
    name: str
    input: Any
    status: str
    created_at: float
    updated_at: float
    attempt: int = 0
    lease: dict[str, Any] | None = None
    cancel_requested: bool = False
    wake_at: float | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    token: str | None = None
    capture: str = "io"
    options: dict[str, Any] = field(default_factory=dict)
    forked_from: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=_not_json).encode()


def to_json_value(value: Any) -> Any:
    """Check that a value can be journaled, the way it will come back on replay."""
    return json.loads(_dump(value))


def _not_json(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(
        f"a {type(value).__name__} cannot be journaled: return JSON-compatible values "
        "(dict, list, str, numbers, bool, None, or a pydantic model) from runs, steps and tools"
    )


def input_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(json.loads(_dump(value)))).hexdigest()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lease_key(run_id: str) -> bytes:
    return b"lease:" + run_id.encode()


def _lease_value(worker: str, attempt: int) -> bytes:
    return f"{worker}\x00{attempt}".encode()


def _cancel_key(run_id: str) -> bytes:
    return b"cancel:" + run_id.encode()


def lease_is_live(lease: dict[str, Any] | None, now: float) -> bool:
    """A lease holds until it expires, or until its process is seen dead on this host."""
    if not lease or lease.get("expires", 0) <= now:
        return False
    return not (lease.get("host") == HOST and not _alive(int(lease.get("pid", 0))))


class RunStore:
    """The runs, events, queue and tokens databases of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._runs = store.db("runs")
        self._events = store.db("events")
        self._queue = store.db("queue")
        self._tokens = store.db("tokens")
        # Small keys read on every step: who holds each run's lease, which runs are cancelled.
        self._flags = store.db("flags")

    # -- reading ------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord:
        with self.store.read() as txn:
            value = txn.get(run_id.encode(), db=self._runs)
        if value is None:
            raise RunNotFound(f"no run {run_id!r} in {self.store.path}")
        return RunRecord.from_json(json.loads(bytes(value)))

    def find(self, run_id: str) -> RunRecord | None:
        try:
            return self.get(run_id)
        except RunNotFound:
            return None

    def runs(self) -> Iterator[RunRecord]:
        for _key, value in self.store.iter_prefix(self._runs, b""):
            yield RunRecord.from_json(json.loads(value))

    def events(self, run_id: str, after: int = 0) -> list[Event]:
        prefix = run_id.encode() + b"\x00"
        start = prefix + _SEQ.pack(after + 1)
        found: list[Event] = []
        with self.store.read() as txn:
            cursor = txn.cursor(db=self._events)
            if cursor.set_range(start):
                for key, value in cursor:
                    if not bytes(key).startswith(prefix):
                        break
                    data = json.loads(bytes(value))
                    found.append(Event(data["seq"], data["type"], data["at"], data["payload"]))
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
    ) -> tuple[RunRecord, bool]:
        """Queue a run; returns (record, created). A known token re-attaches to its run."""
        digest = input_digest({"name": name, "input": input})
        new_id = run_id or f"run_{uuid.uuid4().hex[:20]}"

        def write(txn: lmdb.Transaction) -> tuple[RunRecord, bool]:
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
                txn.put(idempotency_key.encode(), _dump(token), db=self._tokens)
            txn.put(new_id.encode(), _dump(record.to_json()), db=self._runs)
            txn.put(new_id.encode(), _dump({"input": input}), db=self._queue)
            facts = [("run:submitted", {"name": name}), *(seed_events or [])]
            for seq, (kind, payload) in enumerate(facts, start=1):
                self._put_event(txn, new_id, seq, kind, payload, now)
            return record, True

        return self.store.write(write)

    def queued_input(self, run_id: str) -> Any:
        """The run's input, kept with its queue entry even when capture drops it from the run."""
        with self.store.read() as txn:
            value = txn.get(run_id.encode(), db=self._queue)
        return json.loads(bytes(value))["input"] if value is not None else None

    # -- leases ---------------------------------------------------------------------------------

    def claim(self, worker: str, ttl: float, names: set[str] | None = None) -> RunRecord | None:
        """Take the first runnable run under a fresh lease, or None."""

        def write(txn: lmdb.Transaction) -> RunRecord | None:
            now = time.time()
            for key, _ in txn.cursor(db=self._queue):
                raw = txn.get(key, db=self._runs)
                if raw is None:
                    continue
                run = RunRecord.from_json(json.loads(bytes(raw)))
                if names is not None and run.name not in names:
                    continue
                if run.status in TERMINAL:
                    continue
                if run.status == PARKED and not (run.wake_at is not None and run.wake_at <= now):
                    continue
                if run.status == RUNNING and lease_is_live(run.lease, now):
                    continue
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
                txn.put(key, _dump(run.to_json()), db=self._runs)
                txn.put(_lease_key(run.id), _lease_value(worker, run.attempt), db=self._flags)
                return run
            return None

        return self.store.write(write)

    def heartbeat(self, run_id: str, lease: Lease, ttl: float) -> None:
        def write(txn: lmdb.Transaction) -> None:
            self.check_lease(txn, run_id, lease)
            run = self._record(txn, run_id)
            assert run.lease is not None
            run.lease["expires"] = time.time() + ttl
            txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)

        self.store.write(write)

    def release(self, run_id: str, lease: Lease) -> RunRecord:
        """End an attempt with no outcome (its worker is shutting down): the run is queued
        again, claimable at once by any worker, its journal as it was. A lost lease raises
        `RunAttemptEnded`."""

        def write(txn: lmdb.Transaction) -> RunRecord:
            self.check_lease(txn, run_id, lease)
            run = self._record(txn, run_id)
            self.append_in(txn, run_id, "run:released", {"attempt": lease.attempt})
            txn.delete(_lease_key(run_id), db=self._flags)
            run.status, run.lease, run.updated_at = QUEUED, None, time.time()
            txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)
            return run

        return self.store.write(write)

    def check_lease(self, txn: lmdb.Transaction, run_id: str, lease: Lease) -> None:
        """Refuse the write unless this attempt still holds the run's lease."""
        held = txn.get(_lease_key(run_id), db=self._flags)
        if held is None or bytes(held) != _lease_value(lease.worker, lease.attempt):
            raise RunAttemptEnded(
                f"run {run_id} attempt {lease.attempt} no longer holds its lease; "
                "another worker owns the run now"
            )

    def _record(self, txn: lmdb.Transaction, run_id: str) -> RunRecord:
        raw = txn.get(run_id.encode(), db=self._runs)
        if raw is None:
            raise RunNotFound(f"no run {run_id!r} in {self.store.path}")
        return RunRecord.from_json(json.loads(bytes(raw)))

    def request_cancel(self, run_id: str) -> RunRecord:
        """Mark a run cancelled-on-request; a parked run is woken so it can end."""

        def write(txn: lmdb.Transaction) -> RunRecord:
            run = self._record(txn, run_id)
            if run.status in TERMINAL:
                return run
            run.cancel_requested = True
            if run.status == PARKED:
                run.wake_at = 0.0
            run.updated_at = time.time()
            txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)
            txn.put(_cancel_key(run_id), b"1", db=self._flags)
            return run

        return self.store.write(write)

    def terminate(self, run_id: str) -> RunRecord:
        """End a run now, as cancelled, whoever runs it: removing its lease fences the attempt
        still executing out of every further write."""

        def write(txn: lmdb.Transaction) -> RunRecord:
            run = self._record(txn, run_id)
            if run.status in TERMINAL:
                return run
            self.append_in(txn, run_id, "run:cancelled", {"terminated": True})
            run.status, run.lease, run.cancel_requested = CANCELLED, None, True
            run.updated_at = time.time()
            txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)
            txn.put(_cancel_key(run_id), b"1", db=self._flags)
            txn.delete(_lease_key(run_id), db=self._flags)
            txn.delete(run_id.encode(), db=self._queue)
            return run

        return self.store.write(write)

    def cancel_requested(self, run_id: str) -> bool:
        with self.store.read() as txn:
            return txn.get(_cancel_key(run_id), db=self._flags) is not None

    # -- journaling -----------------------------------------------------------------------------

    def append(self, run_id: str, lease: Lease | None, kind: str, payload: dict[str, Any]) -> Event:
        """Append one event (fenced by `lease` when given) and commit it."""
        return self.store.write(self._fenced(run_id, lease, kind, payload))

    async def append_grouped(self, run_id: str, *fact: Any) -> Event:
        """`append(run_id, lease, kind, payload)`, group-committed (`journal.group_commit`)."""
        return await group_commit(self.store).write(self._fenced(run_id, *fact))

    def _fenced(self, run_id: str, lease: Any, kind: str, payload: Any) -> Callable[[Any], Event]:
        def write(txn: lmdb.Transaction) -> Event:
            if lease is not None:
                self.check_lease(txn, run_id, lease)
            return self.append_in(txn, run_id, kind, payload)
        return write

    def append_in(
        self, txn: lmdb.Transaction, run_id: str, kind: str, payload: dict[str, Any]
    ) -> Event:
        prefix = run_id.encode() + b"\x00"
        cursor = txn.cursor(db=self._events)
        # The key just before the first one past this run's events is its last event, if any.
        found = cursor.prev() if cursor.set_range(prefix + b"\xff" * 8) else cursor.last()
        seq = 1
        if found and bytes(cursor.key()).startswith(prefix):
            seq = _SEQ.unpack(bytes(cursor.key())[len(prefix) :])[0] + 1
        return self._put_event(txn, run_id, seq, kind, payload, time.time())

    def _put_event(
        self,
        txn: lmdb.Transaction,
        run_id: str,
        seq: int,
        kind: str,
        payload: dict[str, Any],
        at: float,
    ) -> Event:
        event = Event(seq, kind, at, payload)
        key = run_id.encode() + b"\x00" + _SEQ.pack(seq)
        txn.put(key, _dump(event.to_json()), db=self._events, append=False)
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
    ) -> Event:
        """End an attempt: write its closing event and the run's new status in one commit."""

        def write(txn: lmdb.Transaction) -> Event:
            self.check_lease(txn, run_id, lease)
            run = self._record(txn, run_id)
            event = self.append_in(txn, run_id, kind, payload)
            txn.delete(_lease_key(run_id), db=self._flags)
            run.status = status
            run.lease = None
            run.updated_at = time.time()
            run.wake_at = wake_at
            if status in TERMINAL:
                run.result = result if run.capture == "io" else None
                run.error = error
                txn.delete(run_id.encode(), db=self._queue)
            txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)
            return event

        return self.store.write(write)

    def update(self, run_id: str, **changes: Any) -> RunRecord:
        """Change fields of a run outside any attempt (cancel, answer, wake)."""

        def write(txn: lmdb.Transaction) -> RunRecord:
            raw = txn.get(run_id.encode(), db=self._runs)
            if raw is None:
                raise RunNotFound(f"no run {run_id!r} in {self.store.path}")
            run = RunRecord.from_json(json.loads(bytes(raw)))
            for name, value in changes.items():
                setattr(run, name, value)
            run.updated_at = time.time()
            txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)
            return run

        return self.store.write(write)

    def requeue(self, run_id: str, input: Any) -> None:
        """Queue an ended run again (its journaled work replays on the next attempt)."""

        def write(txn: lmdb.Transaction) -> None:
            raw = txn.get(run_id.encode(), db=self._runs)
            if raw is None:
                raise RunNotFound(f"no run {run_id!r} in {self.store.path}")
            run = RunRecord.from_json(json.loads(bytes(raw)))
            run.status, run.error, run.updated_at = QUEUED, None, time.time()
            txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)
            txn.put(run_id.encode(), _dump({"input": input}), db=self._queue)
            self.append_in(txn, run_id, "run:resumed", {})

        self.store.write(write)

    def deliver(self, run_id: str, kind: str, payload: dict[str, Any]) -> Event:
        """Journal an outside fact for a run (an answer, a signal) and wake it if parked."""

        def write(txn: lmdb.Transaction) -> Event:
            raw = txn.get(run_id.encode(), db=self._runs)
            if raw is None:
                raise RunNotFound(f"no run {run_id!r} in {self.store.path}")
            run = RunRecord.from_json(json.loads(bytes(raw)))
            event = self.append_in(txn, run_id, kind, payload)
            if run.status == PARKED:
                run.wake_at = time.time()
                txn.put(run_id.encode(), _dump(run.to_json()), db=self._runs)
            return event

        return self.store.write(write)
