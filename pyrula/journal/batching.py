"""Batching: the calls concurrent callers of one event loop make, handled together, once each.

Group read (`group_read.py`) and group commit (`group_commit.py`) share this skeleton. A caller
queues its item (a key to read, a write to commit) and awaits its own outcome. The first item
queued while no batch is under way schedules one for the loop's next turn, so the callers
already ready join it; the batch takes every item queued by then, is handled in one go (one
`Txn.get_many` per table, one transaction), and each caller is released with its own outcome.
Items queued meanwhile form the next batch, started as soon as that one is released.

What differs is a batcher's two parameters:

- `in_place(size)`: whether a batch of `size` items is handled on the loop's own thread rather
  than on `executor` (a thread the loop does not wait on). Group commit: while at most one run
  executes on the loop of a local store (LMDB); group read: never.
- `handle(items)`: the batch's work, returning one outcome per item, `(True, result)` or
  `(False, error)`, so one item's failure can be its own (a write that raised fails only its
  caller, `commit_group`); when `handle` itself raises (a read that failed, a commit that
  could not be made), every caller of the batch gets that error.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
# One caller's outcome: (True, its result) or (False, the error it gets).
Outcome = tuple[bool, Any]


class Batcher(Generic[Item]):
    """The items queued by concurrent callers of one event loop, handled in batches."""

    def __init__(
        self,
        handle: Callable[[list[Item]], Sequence[Outcome]],
        executor: Executor,
        in_place: Callable[[int], bool],
    ) -> None:
        self._handle = handle
        self._executor = executor
        self._in_place = in_place
        self._lock = threading.Lock()
        self._items: list[Item] = []
        self._futures: list[asyncio.Future[Any]] = []
        self._busy = False

    async def submit(self, item: Item) -> Any:
        """Queue `item` for the next batch; its result once that batch is handled (its error
        raised)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            self._items.append(item)
            self._futures.append(future)
            start = not self._busy
            self._busy = True
        if start:
            # After the callbacks already ready: callers released together join one batch.
            loop.call_soon(self._next, loop)
        return await future

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            items, futures = self._items, self._futures
            if not items:
                self._busy = False
                return
            self._items, self._futures = [], []
        if self._in_place(len(items)):
            try:
                outcomes = self._handle(items)
            except BaseException as exc:  # as the executor's future would carry it
                outcomes = [(False, exc)] * len(items)
            self._release(loop, futures, outcomes)
            return
        done = loop.run_in_executor(self._executor, self._handle, items)
        done.add_done_callback(lambda outcome: self._handled(loop, futures, outcome))

    def _handled(
        self,
        loop: asyncio.AbstractEventLoop,
        futures: list[asyncio.Future[Any]],
        outcome: asyncio.Future[Sequence[Outcome]],
    ) -> None:
        error = outcome.exception()
        failed: list[Outcome] = [(False, error)] * len(futures)
        self._release(loop, futures, outcome.result() if error is None else failed)

    def _release(
        self,
        loop: asyncio.AbstractEventLoop,
        futures: list[asyncio.Future[Any]],
        outcomes: Sequence[Outcome],
    ) -> None:
        for future, (ok, value) in zip(futures, outcomes, strict=True):
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        self._next(loop)
