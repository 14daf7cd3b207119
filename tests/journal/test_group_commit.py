"""Group commit: concurrent callers share one transaction and one flush, each released only
once its write is committed; the opt-in one-flush commit (`metasync=False`)."""

from __future__ import annotations

import asyncio
import threading
from contextlib import ExitStack
from pathlib import Path

import lmdb
import pytest

from pyrula.errors import RunAttemptEnded
from pyrula.journal import Store
from pyrula.journal.group_commit import group_commit


def _put(key: bytes, value: bytes):
    def write(txn: lmdb.Transaction) -> bytes:
        txn.put(key, value, db=None)
        return key

    return write


def _committed(store: Store, key: bytes) -> bytes | None:
    with store.read() as txn:
        value = txn.get(key)
        return None if value is None else bytes(value)


def test_concurrent_writers_share_commits_and_see_their_own_write_committed(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    writers, writes = 8, 20
    seen_committed: list[bool] = []

    async def writer(w: int) -> None:
        for i in range(writes):
            key = f"w{w}-{i}".encode()
            assert await group_commit(store).write(_put(key, b"v")) == key
            # Released only after the commit: another reader already sees it.
            seen_committed.append(_committed(store, key) == b"v")

    async def main() -> None:
        await asyncio.gather(*(writer(w) for w in range(writers)))

    before = store.env.info()["last_txnid"]
    asyncio.run(main())
    transactions = store.env.info()["last_txnid"] - before
    assert all(seen_committed) and len(seen_committed) == writers * writes
    assert transactions < writers * writes / 2  # groups, not one commit per write
    store.close()


@pytest.mark.parametrize("error", [ValueError("refused"), RunAttemptEnded("lease lost")])
@pytest.mark.parametrize("runs", [1, 2])
def test_a_failing_write_fails_only_its_own_caller_and_writes_nothing(
    tmp_path: Path, error: BaseException, runs: int
) -> None:
    # A lost lease (`RunAttemptEnded`, a BaseException) is one run's refusal: before, it failed
    # every caller of its group, and with one run on the loop it left them waiting for ever.
    store = Store(tmp_path / "store")

    def half_then_fail(txn: lmdb.Transaction) -> None:
        txn.put(b"half", b"written", db=None)
        raise error

    async def main() -> list[object]:
        group = group_commit(store)
        with ExitStack() as executing:
            for _ in range(runs):
                executing.enter_context(group.executing())
            return await asyncio.wait_for(
                asyncio.gather(
                    group.write(_put(b"a", b"1")),
                    group.write(half_then_fail),
                    group.write(_put(b"b", b"2")),
                    return_exceptions=True,
                ),
                30,
            )

    a, failed, b = asyncio.run(main())
    assert (a, b) == (b"a", b"b")
    assert failed is error
    assert _committed(store, b"a") == b"1" and _committed(store, b"b") == b"2"
    assert _committed(store, b"half") is None
    store.close()


def test_the_one_flush_commit_is_opt_in_and_keeps_every_commit_across_reopening(
    tmp_path: Path,
) -> None:
    default = Store(tmp_path / "full")
    assert default.env.flags()["metasync"] is True
    default.close()
    store = Store(tmp_path / "one-flush", metasync=False)
    assert store.env.flags()["metasync"] is False
    store.write(_put(b"k", b"v"))
    store.close()
    with Store(tmp_path / "one-flush") as reopened:
        assert _committed(reopened, b"k") == b"v"


@pytest.mark.parametrize("runs", [1, 3])
def test_group_commit_returns_each_callers_own_result(tmp_path: Path, runs: int) -> None:
    store = Store(tmp_path / "store")

    async def main() -> list[bytes]:
        return list(
            await asyncio.gather(
                *(group_commit(store).write(_put(f"k{i}".encode(), b"v")) for i in range(runs))
            )
        )

    assert asyncio.run(main()) == [f"k{i}".encode() for i in range(runs)]
    store.close()


def test_a_lone_run_commits_on_its_loop_thread_and_several_on_the_committer(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store")
    committed_on: list[int] = []

    def put(key: bytes):
        def write(txn: lmdb.Transaction) -> bytes:
            committed_on.append(threading.get_ident())
            txn.put(key, b"v", db=None)
            return key

        return write

    async def main() -> tuple[int, set[int], set[int]]:
        group = group_commit(store)
        with group.executing():  # one run on the loop: no hand-off to the committer thread
            assert await group.write(put(b"alone")) == b"alone"
            # Released after its commit, whichever thread made it.
            assert _committed(store, b"alone") == b"v"
        alone = set(committed_on)
        committed_on.clear()
        with group.executing(), group.executing():  # two runs: the loop stays free for both
            before = store.env.info()["last_txnid"]
            keys = await asyncio.gather(group.write(put(b"a")), group.write(put(b"b")))
            assert keys == [b"a", b"b"]
            assert store.env.info()["last_txnid"] - before == 1  # still one shared commit
        return threading.get_ident(), alone, set(committed_on)

    loop_thread, alone, together = asyncio.run(main())
    assert alone == {loop_thread}
    assert together and loop_thread not in together
    assert _committed(store, b"a") == _committed(store, b"b") == b"v"
    store.close()
