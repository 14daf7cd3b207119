"""Group read: the point reads of concurrent callers on one event loop share one round trip.

On a store across a network (PostgreSQL), a read of one key costs a round trip, and made from
the event loop it blocks every run of the worker meanwhile. `GroupRead.get` instead queues the
key; one reader thread reads every key queued so far with one `Txn.get_many` per table, then
releases each caller with its own value (`batching.Batcher`, the skeleton it shares with group
commit). A key asked alone goes to the reader thread too: the hand-off costs about 0.1 ms of
CPU, and the loop is free for the round trip, which is what a worker's other runs and a run's
concurrent model calls need (benchmarks/bench_pg_reads.py). The read is made after the caller
asked, so it sees every commit that preceded the call. On LMDB, whose reads are a lookup in a
mapped file, `get` reads at once.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from pyrula.journal import async_store
from pyrula.journal.batching import Batcher, Outcome
from pyrula.journal.store import Store

_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyrula-read")
_Key = tuple[bytes, Any]  # (key, db)


class GroupRead:
    """Read the keys queued by concurrent callers of one event loop together.

    Use one per store and event loop (`group_read(store)` keeps them)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._batch: Batcher[_Key] = Batcher(self._read, _READER, self.reads_in_place)

    async def get(self, key: bytes, *, db: Any) -> bytes | None:
        """The value of `key` in `db` as of now (None if absent)."""
        if not async_store.remote(self.store):  # looked up there: a benchmark switches it
            return self.store.get(db, key)
        return cast("bytes | None", await self._batch.submit((key, db)))

    def reads_in_place(self, size: int) -> bool:
        """Whether a batch of `size` keys is read on the loop's own thread: never, a lone key
        included (the loop stays free for the round trip; see the module's docstring)."""
        return False

    def _read(self, batch: list[_Key]) -> list[Outcome]:
        """Every key of `batch` read in one transaction; one failed read fails them all."""
        keys: dict[Any, list[bytes]] = defaultdict(list)
        for key, db in batch:
            keys[db].append(key)
        with self.store.read() as txn:
            found = {db: txn.get_many(sorted(set(wanted)), db=db) for db, wanted in keys.items()}
        return [(True, found[db].get(key)) for key, db in batch]


_readers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, GroupRead]] = (
    weakref.WeakKeyDictionary()
)


def group_read(store: Store) -> GroupRead:
    """The `GroupRead` of `store` on the running event loop."""
    per_store = _readers.setdefault(asyncio.get_running_loop(), {})
    reader = per_store.get(id(store))
    if reader is None or reader.store is not store:
        reader = per_store[id(store)] = GroupRead(store)
    return reader
