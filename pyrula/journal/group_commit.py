"""Group commit: the writes of concurrent callers on one event loop share one transaction.

A fsync'd commit costs a device flush (or two) whatever it holds, so a worker running several
runs at once pays one flush per fact in turn. `GroupCommit.write` instead queues the caller's
write function; a committer thread runs every write queued so far in a single transaction of
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

The queue, the batches and the release are `batching.Batcher`'s (shared with group read); what
is this module's is where a group commits (`_in_place`) and how its writes fail. Each write names
its `scope` (its run): a group is written under its writes' scopes (`Store.write(scope=)`), so
on PostgreSQL it excludes only other writes of its own runs, and the groups of several worker
processes commit side by side (one write without a scope makes its group unscoped: the store's
lock). A write may carry a `fast` form: a
function that sends its write without waiting for an answer (`Txn.put_fenced`) and returns how
to read, afterwards, whether it took effect. The fast forms of a group are all sent first, so
on PostgreSQL the group costs one round trip for all its writes plus the commit; a write whose
fast form did not take effect (its guess was stale, its fence moved) runs its full `fn` in the
same transaction.

A write function that raises fails only its own caller: the transaction is abandoned (nothing of
it is written), and the group is committed again without it. A lost connection (the store's
`retryable`) fails no caller: the store retries the whole group on a fresh one. So, as with
`Store.write`, a write function may run more than once and must only touch the transaction.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pyrula.journal.batching import Batcher, Outcome
from pyrula.journal.store import Store, Txn

T = TypeVar("T")
MISSED = object()
# A fast form: send the write, return how to learn its result afterwards (`MISSED`: run `fn`).
Fast = Callable[[Txn], Callable[[], Any]]


@dataclass
class _Write:
    """One caller's write: its function, its fast form, and the one name it touches (`scope`,
    its run: the group's lock, and what its fast form guesses about; see `commit_group`)."""

    fn: Callable[[Txn], Any]
    fast: Fast | None = None
    scope: str | None = None


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
        self._runs = 0  # runs executing on this loop (`executing`)
        self._batch: Batcher[_Write] = Batcher(self._commit, _COMMITTER, self._in_place)

    @contextmanager
    def executing(self) -> Iterator[None]:
        """Count one run executing on this loop while the block lasts: with at most one, its
        groups are committed on the loop's thread (see the module's docstring)."""
        self._runs += 1
        try:
            yield
        finally:
            self._runs -= 1

    @property
    def runs(self) -> int:
        """How many runs execute on this loop now (`executing`)."""
        return self._runs

    async def write(
        self, fn: Callable[[Txn], T], *, fast: Fast | None = None, scope: str | None = None
    ) -> T:
        """Run `fn` (or its `fast` form) in the next group's transaction; return its result once
        that is committed. `scope`: the one name (its run) the write touches, locked for the
        group on PostgreSQL; two fast forms of one scope in a group may not both hold (see
        `commit_group`). None: the group takes the store's lock."""
        return cast(T, await self._batch.submit(_Write(fn, fast, scope)))

    def _in_place(self, size: int) -> bool:
        """Whether a group is committed on the loop's own thread: a local store and nothing
        else of the worker on this loop."""
        return self._runs <= 1 and not self.store.remote

    def _commit(self, group: list[_Write]) -> list[Outcome]:
        return commit_group(self.store, group)


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


def commit_group(
    store: Store, writes: Sequence[_Write | Callable[[Txn], Any]]
) -> list[tuple[bool, Any]]:
    """Run `writes` in one committed transaction of `store`: (True, result) for each that
    returned, (False, error) for each that raised (and wrote nothing). A lost connection is the
    store's to retry (the whole group again), never one write's failure.

    On PostgreSQL the fast forms' answers are read after the commit, whose round trip carries
    them, so a group of fast forms costs one round trip; a fast form that missed then runs its
    full `fn` in a second transaction. Where two fast forms of one `scope` share the group (two
    facts of one run guessing the same sequence number), or on LMDB (whose answers cost
    nothing), the answers are read before the commit and a miss runs `fn` in the same one."""
    group = [w if isinstance(w, _Write) else _Write(w) for w in writes]
    scopes = [w.scope for w in group if w.fast is not None and w.scope is not None]
    after = store.remote and len(set(scopes)) == len(scopes)
    failed: dict[int, BaseException] = {}

    def run(txn: Txn) -> list[Any]:
        # Every fast form is sent first; their answers then come back together.
        answers = [
            None if index in failed or write.fast is None else write.fast(txn)
            for index, write in enumerate(group)
        ]
        results: list[Any] = []
        for index, (write, answer) in enumerate(zip(group, answers, strict=True)):
            if index in failed:
                results.append(None)
                continue
            if after and answer is not None:
                results.append(answer)  # read once committed
                continue
            try:
                result = MISSED if answer is None else answer()
                results.append(write.fn(txn) if result is MISSED else result)
            except store.retryable:
                raise  # the connection, not this write: the whole group is tried again
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # a refusal (a lost lease) is this write's too
                raise _Failed(index, exc) from exc
        return results

    while True:
        live = [write for index, write in enumerate(group) if index not in failed]
        try:
            fenced_only = after and all(write.fast is not None for write in live)
            results = store.write(run, scope=_scope(live), fenced_only=fenced_only)
        except _Failed as failure:
            failed[failure.index] = failure.error
            if len(failed) == len(group):
                results = [None] * len(group)
                break
            continue
        break
    outcomes: list[tuple[bool, Any]] = [
        (False, failed[i]) if i in failed else (True, result) for i, result in enumerate(results)
    ]
    if after:
        missed: list[int] = []
        for index, write in enumerate(group):
            if index not in failed and write.fast is not None:
                value = outcomes[index][1]()
                outcomes[index] = (True, value)
                if value is MISSED:
                    missed.append(index)
        if missed:
            again = commit_group(store, [_Write(group[i].fn) for i in missed])
            for index, outcome in zip(missed, again, strict=True):
                outcomes[index] = outcome
    return outcomes


def _scope(writes: list[_Write]) -> list[str] | None:
    """The names a group locks: each of its writes' scope, or None (the store's lock) if one of
    them has none."""
    names = {write.scope for write in writes}
    return None if None in names else sorted(n for n in names if n is not None)
