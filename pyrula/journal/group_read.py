"""Group read: the point reads of concurrent callers on one event loop share one round trip.

On a store across a network (PostgreSQL), a read of one key costs a round trip, and made from
the event loop it blocks every run of the worker meanwhile. `GroupRead.get` instead queues the
key; one reader thread reads every key queued so far with one `Txn.get_many` per table, then
releases each caller with its own value. A key asked alone goes to the reader thread too: the
hand-off costs about 0.1 ms of CPU, and the loop is free for the round trip, which is what a
worker's other runs and a run's concurrent model calls need (benchmarks/bench_pg_reads.py). The
read is made after the caller asked, so it sees every commit that preceded the call. On LMDB,
whose reads are a lookup in a mapped file, `get` reads at once.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyrula.journal import async_store
from pyrula.journal.store import Store

_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyrula-read")
_Pending = tuple[bytes, Any, "asyncio.Future[bytes | None]"]


class GroupRead:
    """Read the keys queued by concurrent callers of one event loop together.

    Use one per store and event loop (`group_read(store)` keeps them)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._reading = False

    async def get(self, key: bytes, *, db: Any) -> bytes | None:
        """The value of `key` in `db` as of now (None if absent)."""
        if not async_store.remote(self.store):  # looked up there: a benchmark switches it
            return self.store.get(db, key)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes | None] = loop.create_future()
        with self._lock:
            self._pending.append((key, db, future))
            start = not self._reading
            self._reading = True
        if start:
            loop.call_soon(self._read_next, loop)  # after the callers already ready join
        return await future

    def _read_next(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            if not batch:
                self._reading = False
                return
        done = loop.run_in_executor(_READER, self._read, batch)
        done.add_done_callback(
            lambda outcome: self._release(
                loop,
                batch,
                None if outcome.exception() else outcome.result(),
                outcome.exception(),
            )
        )

    def _read(self, batch: list[_Pending]) -> list[bytes | None]:
        keys: dict[Any, list[bytes]] = defaultdict(list)
        for key, db, _ in batch:
            keys[db].append(key)
        with self.store.read() as txn:
            found = {db: txn.get_many(sorted(set(wanted)), db=db) for db, wanted in keys.items()}
        return [found[db].get(key) for key, db, _ in batch]

    def _release(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[_Pending],
        values: list[bytes | None] | None,
        error: BaseException | None,
    ) -> None:
        for index, (_, _, future) in enumerate(batch):
            if future.cancelled():
                continue
            if values is None:
                future.set_exception(error or RuntimeError("no value read"))
            else:
                future.set_result(values[index])
        self._read_next(loop)


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
