"""Group read: concurrent point reads on one event loop, each answered as of its call."""

from __future__ import annotations

import asyncio

from pyrula.journal import Store
from pyrula.journal.group_read import group_read


def test_concurrent_reads_each_get_their_own_key_as_committed_before_the_call(store_location):
    with Store(store_location) as store:
        flags = store.db("flags")
        store.write(
            lambda txn: [txn.put(f"k{i}".encode(), f"v{i}".encode(), db=flags) for i in range(5)]
        )

        async def read_all() -> list[bytes | None]:
            keys = [f"k{i}".encode() for i in range(6)] + [b"k1"]
            return list(await asyncio.gather(*(group_read(store).get(k, db=flags) for k in keys)))

        expected = [f"v{i}".encode() for i in range(5)]
        assert asyncio.run(read_all()) == [*expected, None, b"v1"]

        async def after_a_write() -> bytes | None:
            assert await group_read(store).get(b"k5", db=flags) is None
            store.write(lambda txn: txn.put(b"k5", b"now", db=flags))
            return await group_read(store).get(b"k5", db=flags)

        assert asyncio.run(after_a_write()) == b"now"
