"""Group commit: the writes of concurrent callers on one event loop share one transaction.

A fsync'd commit costs a device flush (or two) whatever it holds, so a worker running several
runs at once pays one flush per fact in turn. `GroupCommit.write` instead queues the caller's
write function; one committer thread runs every write queued so far in a single transaction of
`Store.write` and commits it, flush included, and only then releases each of those callers with
its own result. A fact is durable before its caller continues, as with `Store.write`; what
changes is that the callers queued together share the flush. While one group commits, the next
fills, so a lone caller pays about what `Store.write` costs plus a hand-off to the thread.

That hand-off (to the thread and back to the loop) cost about 100 µs of CPU per commit, two
thirds of a journaled step's CPU, which buys nothing when one run executes on the loop: while
its commit flushes, nothing else of the worker waits on that loop. So while at most one run is
counted on the loop (`GroupCommit.executing`, held by the worker around each run's body), a
group is committed on the loop's own thread instead (on LMDB only: a PostgreSQL commit is a
round trip, which the loop does not wait out); with more, the committer thread commits it while
the loop goes on with the other runs. Either way a caller is released only after its
commit, and callers queued together share it.

A write function that raises fails only its own caller: the transaction is abandoned (nothing of
it is written), and the group is committed again without it. A lost connection (the store's
`retried_errors`) fails no caller: the store retries the whole group on a fresh one. So, as with
`Store.write`, a write function may run more than once and must only touch the transaction.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from pyrula.journal.async_store import remote
from pyrula.journal.store import Store, Txn

T = TypeVar("T")
_Write = Callable[[Txn], Any]


class _Failed(Exception):
    """One write of a group raised: which, and what."""

    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(index)
        self.index = index
        self.error = error


# One committer thread for the process: LMDB serialises writers anyway.
_COMMITTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyrula-commit")


class GroupCommit:
    """Commit the writes queued by concurrent callers of one event loop together.

    Use one per store and event loop (`group_commit(store)` keeps them).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._pending: list[tuple[_Write, asyncio.Future[Any]]] = []
        self._committing = False
        self._runs = 0  # runs executing on this loop (`executing`)

    @contextmanager
    def executing(self) -> Iterator[None]:
        """Count one run executing on this loop while the block lasts: with at most one, its
        groups are committed on the loop's thread (see the module's docstring)."""
        self._runs += 1
        try:
            yield
        finally:
            self._runs -= 1

    async def write(self, fn: Callable[[Txn], T]) -> T:
        """Run `fn` in the next group's transaction; return its result once that is committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._pending.append((fn, future))
            start = not self._committing
            self._committing = True
        if start:
            # After the callbacks already ready: callers released together join one group.
            loop.call_soon(self._commit_next, loop)
        return await future

    def _commit_next(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            group, self._pending = self._pending, []
            if not group:
                self._committing = False
                return
        writes = [f for f, _ in group]
        if self._runs <= 1 and not remote(self.store):
            # A local store and nothing else of the worker on this loop: commit here.
            try:
                results = commit_group(self.store, writes)
            except Exception as exc:
                results = [(False, exc)] * len(group)
            self._release(loop, group, results)
            return
        done = loop.run_in_executor(_COMMITTER, commit_group, self.store, writes)
        done.add_done_callback(lambda outcome: self._committed(loop, group, outcome))

    def _committed(
        self,
        loop: asyncio.AbstractEventLoop,
        group: list[tuple[_Write, asyncio.Future[Any]]],
        outcome: asyncio.Future[list[tuple[bool, Any]]],
    ) -> None:
        error = outcome.exception()
        failed: list[tuple[bool, Any]] = [(False, error)] * len(group)
        self._release(loop, group, outcome.result() if error is None else failed)

    def _release(
        self,
        loop: asyncio.AbstractEventLoop,
        group: list[tuple[_Write, asyncio.Future[Any]]],
        results: list[tuple[bool, Any]],
    ) -> None:
        for (_fn, future), (ok, value) in zip(group, results, strict=True):
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        self._commit_next(loop)


_groups: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, GroupCommit]] = (
    weakref.WeakKeyDictionary()
)


def group_commit(store: Store) -> GroupCommit:
    """The `GroupCommit` of `store` on the running event loop."""
    per_store = _groups.setdefault(asyncio.get_running_loop(), {})
    shared = store.shared_handle()
    group = per_store.get(id(shared))
    if group is None or group.store.shared_handle() is not shared:
        group = per_store[id(shared)] = GroupCommit(store)
    return group


def commit_group(store: Store, writes: list[_Write]) -> list[tuple[bool, Any]]:
    """Run `writes` in one committed transaction of `store`: (True, result) for each that
    returned, (False, error) for each that raised (and wrote nothing)."""
    failed: dict[int, BaseException] = {}

    def group(txn: Txn) -> list[Any]:
        results: list[Any] = []
        for index, fn in enumerate(writes):
            if index in failed:
                results.append(None)
                continue
            try:
                results.append(fn(txn))
            except store.retried_errors:
                raise  # the connection, not this write: the whole group is tried again
            except Exception as exc:
                raise _Failed(index, exc) from exc
        return results

    while True:
        try:
            results = store.write(group)
        except _Failed as failure:
            failed[failure.index] = failure.error
            if len(failed) == len(writes):
                results = [None] * len(writes)
                break
            continue
        break
    return [
        (False, failed[i]) if i in failed else (True, result) for i, result in enumerate(results)
    ]
