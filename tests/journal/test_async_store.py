"""The store from an event loop (`journal.async_store`): the same transactions as the sync
calls, and on PostgreSQL a write waiting on the server never holds the loop."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from pyrula.journal.async_store import acall
from pyrula.journal.store import Store, Txn


def _put(store: Store, key: bytes, value: bytes):
    db = store.db("meta")

    def write(txn: Txn) -> bytes | None:
        before = txn.get(key, db=db)
        txn.put(key, value, db=db)
        return None if before is None else bytes(before)

    return write


def test_acall_runs_the_same_transactions_as_the_sync_calls(store_location):
    store = Store(store_location)
    db = store.db("meta")

    def scan(txn: Txn) -> list[bytes]:
        return [bytes(k) for k, _ in txn.scan(db, b"k")]

    def read(fn):
        def within() -> list[bytes]:
            with store.read() as txn:
                return fn(txn)

        return within

    async def main() -> tuple:
        first = await acall(store, store.write, _put(store, b"k", b"one"))
        second = await acall(store, store.write, _put(store, b"k", b"two"), scope=["k"])
        got = await acall(store, store.get, db, b"k")
        scanned = await acall(store, read(scan))
        counted = await acall(store, store.stat)
        return first, second, got, scanned, counted["entries"]["meta"]

    try:
        first, second, got, scanned, entries = asyncio.run(main())
        assert (first, second, got, scanned) == (None, b"one", b"two", [b"k"])
        assert store.get(db, b"k") == b"two"  # committed, as the sync call would have
        assert entries >= 1
    finally:
        store.close()


def test_on_lmdb_the_calls_are_made_in_place(tmp_path):
    store = Store(str(tmp_path / "store"))

    async def main() -> int:
        return await acall(store, threading.get_ident)

    try:
        assert asyncio.run(main()) == threading.get_ident()
    finally:
        store.close()


@pytest.mark.skipif(
    "postgresql" not in os.environ.get("PYRULA_TEST_BACKENDS", "postgresql"),
    reason="this leg tests LMDB only (PYRULA_TEST_BACKENDS)",
)
def test_a_write_waiting_on_the_server_leaves_the_loop_running():
    from tests.fakes.postgres import HeldStore, fresh_url

    store = Store(fresh_url())
    held = HeldStore(store.url, safety=10)

    async def main() -> tuple[int, int]:
        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.ensure_future(heartbeat())
        puts = [_put(store, b"w%d" % i, b"v") for i in range(3)]
        writes = asyncio.gather(*(acall(store, store.write, put) for put in puts))
        while not writes.done() and await asyncio.to_thread(held.waiting) < 3:
            pass
        # All three writes wait on the server at once, and the loop still runs meanwhile.
        before = ticks
        still = await asyncio.to_thread(held.waiting)
        during = ticks - before
        held.release()
        await writes
        beat.cancel()
        return still, during

    try:
        still, during = asyncio.run(main())
        assert still == 3 and during > 0
        assert [store.get(store.db("meta"), b"w%d" % i) for i in range(3)] == [b"v"] * 3
    finally:
        held.release()
        store.close()
