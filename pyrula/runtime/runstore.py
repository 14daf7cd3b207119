"""Runs in the store (`RunStore`): their records, submitting one (its idempotency token), and
changing one from outside an attempt.

The store's other sides are its bases: the event journals (`run_events.py`), the queue and its
leases (`run_leases.py`), cancel flags (`run_cancels.py`), deleting ended runs (`purging.py`) and
withheld values (`withheld.py`). Every fact is one committed write transaction; a write made for
an attempt is fenced by its lease (`run_events.py`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pyrula.errors import IdempotencyConflict, RunExists, RunNotFound
from pyrula.journal.store import Store, Txn
from pyrula.runtime import fact_log
from pyrula.runtime.leases import HOST
from pyrula.runtime.leases import lease_is_live as lease_is_live  # re-exported
from pyrula.runtime.purging import RunPurging, purged_record, token_scope
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
    input_digest,
)
from pyrula.runtime.run_cancels import RunCancels
from pyrula.runtime.run_leases import RunLeases


class RunStore(RunLeases, RunCancels, RunPurging):
    """The runs, events, queue and tokens databases of one store: reading runs, submitting and
    changing them here; the events, leases and cancels come from its bases."""

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

        # Its run, and its idempotency key if it has one: submissions without a key, and of
        # different keys, never wait on each other.
        keyed = () if idempotency_key is None else (token_scope(idempotency_key),)
        return self.store.write(write, scope=(new_id, *keyed))

    def queued_input(self, run_id: str) -> Any:
        """The run's input, kept with its queue entry even when capture drops it from the run."""
        with self.store.read() as txn:
            value = txn.get(run_id.encode(), db=self._queue)
        return json.loads(bytes(value))["input"] if value is not None else None

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
