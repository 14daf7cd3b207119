"""Deleting an ended run from a store (LMDB or PostgreSQL), in bounded transactions: the
store side of retention.

`RunStore` takes these methods from `RunPurging`; the policy (which runs, how old, their
children) is `pyrula.runtime.retention`, which calls only these methods and so works on any
store that has them.

A run's facts go first, a bounded batch per transaction (its exchanges, events and withheld
values), and its record last, so a purge cut short (a crash, a full disk) leaves the run findable
and the next purge finishes it. Every transaction checks again that the run has ended: a run that
is running, parked or queued is never touched.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import run_prefix
from pyrula.journal.store import Store, Txn
from pyrula.runtime.leases import lease_key
from pyrula.runtime.records import TERMINAL, RunRecord, dump_json

# Keys deleted per write transaction: a purge never holds the store's writer for long.
PURGE_BATCH = 500


class RunPurging:
    """Finding ended runs by age, deleting one, and expiring idempotency tokens."""

    store: Store
    _runs: Any
    _events: Any
    _queue: Any
    _tokens: Any
    _flags: Any
    _withheld: Any

    def ended_before(self, cutoff: float) -> list[RunRecord]:
        """The runs that ended (completed, failed, cancelled, budget exceeded) before `cutoff`
        (Unix time of their last change), oldest first."""
        found = []
        for _key, value in self.store.iter_prefix(self._runs, b""):
            run = RunRecord.from_json(json.loads(value))
            if run.status in TERMINAL and run.updated_at < cutoff:
                found.append(run)
        return sorted(found, key=lambda run: run.updated_at)

    def purge_run(self, run_id: str, *, batch: int = PURGE_BATCH) -> bool:
        """Delete everything of an ended run: its model calls' exchanges, events, withheld
        values, queue entry, lease and cancel flags and record. Its idempotency token stays
        until its own TTL, marked purged, so a late resubmission still attaches instead of
        running the work again. False (nothing deleted) when the run is missing or not ended."""
        if not self._ended(run_id):
            return False
        exchanges = Exchanges(self.store)
        while True:
            found = self.store.iter_prefix(self.store.exchanges_db, run_prefix(run_id))
            keys = [key for key, _ in itertools.islice(found, batch)]
            if not keys:
                break
            if not self._ended(run_id):  # resumed meanwhile: stop before its journal goes
                return False
            exchanges.delete(keys)
        prefix = run_id.encode() + b"\x00"
        for db in (self._events, self._withheld):
            while self.store.write(_bound(self._delete_batch, db, prefix, batch), scope=(run_id,)):
                pass
        return bool(self.store.write(lambda txn: self._delete_record(txn, run_id)))

    def expire_tokens(self, now: float | None = None, *, batch: int = PURGE_BATCH) -> int:
        """Delete idempotency tokens past their TTL; returns how many went."""
        moment = time.time() if now is None else now
        removed = 0
        while True:

            def write(txn: Txn) -> int:
                dead = [
                    key
                    for key, value in txn.scan(self._tokens)
                    if json.loads(value)["expires"] <= moment
                ][:batch]
                for key in dead:
                    txn.delete(key, db=self._tokens)
                return len(dead)

            gone = self.store.write(write)
            removed += gone
            if gone < batch:
                return removed

    # -- inside one transaction -------------------------------------------------------------

    def _ended(self, run_id: str) -> bool:
        with self.store.read() as txn:
            raw = txn.get(run_id.encode(), db=self._runs)
        return raw is not None and json.loads(bytes(raw))["status"] in TERMINAL

    def _delete_batch(self, txn: Txn, db: Any, prefix: bytes, batch: int) -> int:
        """Delete up to `batch` keys under `prefix` (if the run has still ended); returns how
        many, so the caller goes on until none is left."""
        if db is None or not self._ended_in(txn, prefix[:-1].decode()):
            return 0
        keys = [key for key, _ in itertools.islice(txn.scan(db, prefix), batch)]
        for key in keys:
            txn.delete(key, db=db)
        return len(keys)

    def _delete_record(self, txn: Txn, run_id: str) -> bool:
        if not self._ended_in(txn, run_id):
            return False
        key = run_id.encode()
        run = RunRecord.from_json(json.loads(bytes(txn.get(key, db=self._runs) or b"{}")))
        txn.delete(key, db=self._queue)
        txn.delete(lease_key(run_id), db=self._flags)
        txn.delete(b"cancel:" + key, db=self._flags)
        if run.token is not None:
            held = txn.get(run.token.encode(), db=self._tokens)
            token = json.loads(bytes(held)) if held is not None else None
            if token is not None and token["run_id"] == run_id:
                token["purged"] = {"status": run.status, "name": run.name, "at": time.time()}
                txn.put(run.token.encode(), dump_json(token), db=self._tokens)
        return bool(txn.delete(key, db=self._runs))

    def _ended_in(self, txn: Txn, run_id: str) -> bool:
        raw = txn.get(run_id.encode(), db=self._runs)
        return raw is not None and json.loads(bytes(raw))["status"] in TERMINAL


def purged_record(token: dict[str, Any], key: str, capture: str) -> RunRecord:
    """What a submission attached to a purged run gets: its id, name and ending, no more."""
    purged = token["purged"]
    return RunRecord(
        id=token["run_id"],
        name=purged["name"],
        input=None,
        status=purged["status"],
        created_at=purged["at"],
        updated_at=purged["at"],
        token=key,
        capture=capture,
    )


def _bound(
    fn: Callable[[Txn, Any, bytes, int], int], db: Any, prefix: bytes, batch: int
) -> Callable[[Txn], int]:
    return lambda txn: fn(txn, db, prefix, batch)
