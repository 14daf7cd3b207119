"""Deleting an ended run from a store (LMDB or PostgreSQL), in bounded transactions: the
store side of retention.

`RunStore` takes these methods from `RunPurging`; the policy (which runs, how old, their
children) is `pyrula.runtime.retention`, which calls only these methods and so works on any
store that has them.

A run is deleted in write transactions of at most `batch` keys each: its model calls' exchanges
(with their frame pages), then its events and withheld values, and, in the transaction that
finds none of them left, its record, queue entry, lease and cancel flags. A run smaller than a
batch goes in one transaction. Its record goes last, so a purge cut short (a crash, a full disk)
leaves the run findable and the next purge finishes it. Every transaction checks again that the
run has ended: a run that is running, parked or queued (resumed meanwhile) is never touched.

Each transaction is scoped (`Store.write(scope=...)`) to the run and to its idempotency key
(`token_scope`), the only keys it touches: on PostgreSQL it then excludes only that run's writes
and a submission under that key, never a claim or another run's write (docs/scaling.md,
"Retention at scale"). Expiring tokens is batched the same way, each batch scoped to its keys.
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import run_prefix
from pyrula.journal.store import Store, Txn
from pyrula.runtime.cancel_flags import cancel_key
from pyrula.runtime.leases import lease_key
from pyrula.runtime.records import TERMINAL, RunRecord, dump_json

# Keys deleted per write transaction: a purge never holds a run's writers for long.
PURGE_BATCH = 500
# What one purge transaction found: the run is gone now, more of it is left, or it has not ended.
_GONE, _MORE, _LIVE = "gone", "more", "live"


def token_scope(key: str) -> str:
    """The write scope of the idempotency token `key` (a submission under it, its purge)."""
    return f"token:{key}"


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
        running the work again. False (nothing more deleted) when the run is missing or not
        ended, or is resumed before the purge is through."""
        with self.store.read() as txn:
            raw = txn.get(run_id.encode(), db=self._runs)
        if raw is None or (run := json.loads(bytes(raw)))["status"] not in TERMINAL:
            return False
        token = run.get("token")
        scope = (run_id,) if token is None else (run_id, token_scope(token))
        write = functools.partial(self._purge_batch, Exchanges(self.store), run_id, batch)
        while (step := self.store.write(write, scope=scope)) == _MORE:
            pass
        return step == _GONE

    def expire_tokens(self, now: float | None = None, *, batch: int = PURGE_BATCH) -> int:
        """Delete idempotency tokens past their TTL; returns how many went. One pass over the
        tokens (read without a lock), each batch of expired ones deleted in a write scoped to
        their keys that checks each again."""
        moment = time.time() if now is None else now
        removed = 0
        after: bytes | None = None
        while True:
            dead, after = self._expired(moment, after, batch)
            if dead:
                scope = [token_scope(key.decode()) for key in dead]
                removed += self.store.write(
                    functools.partial(self._expire_in, dead, moment), scope=scope
                )
            if after is None:
                return removed

    # -- inside one transaction -------------------------------------------------------------

    def _purge_batch(self, exchanges: Exchanges, run_id: str, batch: int, txn: Txn) -> str:
        """Delete up to `batch` keys of an ended run, its record once nothing else is left."""
        raw = txn.get(run_id.encode(), db=self._runs)
        run = RunRecord.from_json(json.loads(bytes(raw))) if raw is not None else None
        if run is None or run.status not in TERMINAL:
            return _LIVE  # resumed (or purged by another) meanwhile: nothing more is touched
        left = batch
        prefix = run_id.encode() + b"\x00"
        for db, under in (
            (self.store.exchanges_db, run_prefix(run_id)),
            (self._events, prefix),
            (self._withheld, prefix),
        ):
            if db is None:
                continue
            rows = [(bytes(k), bytes(v)) for k, v in itertools.islice(txn.scan(db, under), left)]
            if db is self.store.exchanges_db:
                exchanges.delete_scanned(txn, rows)
            else:
                txn.delete_many([key for key, _ in rows], db=db)
            left -= len(rows)
            if left <= 0:
                return _MORE
        self._delete_record(txn, run_id, run)
        return _GONE

    def _delete_record(self, txn: Txn, run_id: str, run: RunRecord) -> None:
        key = run_id.encode()
        txn.delete_many([key], db=self._queue)
        txn.delete_many([lease_key(run_id), cancel_key(run_id)], db=self._flags)
        if run.token is not None:
            held = txn.get(run.token.encode(), db=self._tokens)
            token = json.loads(bytes(held)) if held is not None else None
            if token is not None and token["run_id"] == run_id:
                token["purged"] = {"status": run.status, "name": run.name, "at": time.time()}
                txn.put(run.token.encode(), dump_json(token), db=self._tokens)
        txn.delete_many([key], db=self._runs)

    def _expired(
        self, moment: float, after: bytes | None, batch: int
    ) -> tuple[list[bytes], bytes | None]:
        """Up to `batch` keys of tokens expired at `moment`, past `after`, and where the next
        look starts (None: the table's end was reached)."""
        found: Iterator[tuple[bytes, bytes]] = self.store.iter_prefix(
            self._tokens, b"", after=after
        )
        dead: list[bytes] = []
        try:
            for key, value in found:
                if json.loads(value)["expires"] <= moment:
                    dead.append(bytes(key))
                    if len(dead) >= batch:
                        return dead, dead[-1]
        finally:
            close = getattr(found, "close", None)
            if close is not None:
                close()  # LMDB: its read transaction ends before the write begins
        return dead, None

    def _expire_in(self, keys: list[bytes], moment: float, txn: Txn) -> int:
        held = txn.get_many(keys, db=self._tokens)
        dead = [key for key in keys if key in held and json.loads(held[key])["expires"] <= moment]
        txn.delete_many(dead, db=self._tokens)
        return len(dead)


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
