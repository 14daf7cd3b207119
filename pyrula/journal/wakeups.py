"""Wake-ups on a PostgreSQL store: `LISTEN/NOTIFY` instead of polling.

A write that makes work for someone else (a run queued or released, a run parked, answered or
finished, a cancel requested) calls `txn.wake()`; the PostgreSQL store then sends `NOTIFY
pyrula_wake` inside the same transaction, so it is delivered exactly when the fact commits. One
listening connection per store and event loop counts the notifications; a waiter notes the count
before it looks at the store (`seen = wakeups.count`) and `wait(seen, timeout)` returns as soon
as the count has moved, so a notification that lands between the look and the wait is not lost.
Polling stays as the fallback: `wait` returns at `timeout` whatever happens, and a lost listening
connection is reopened with backoff (every waiter is woken then, since notifications may have
been missed while it was down).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

CHANNEL = "pyrula_wake"
# With wake-ups, polling is only the fallback: a waiter looks again at least this often.
WAKE_FALLBACK_SECONDS = 5.0
log = logging.getLogger("pyrula.store")


class Wakeups:
    """The notifications of one PostgreSQL store, for one event loop."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.count = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        # Whether LISTEN is in place now: while it stays so, every notification sent since is
        # counted (a reconnect counts one more, for what it may have missed).
        self.live = False

    async def start(self) -> None:
        """Begin listening (once); returns when the first LISTEN is in place or has failed."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._listen())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await self._ready.wait()

    async def wait(self, seen: int, timeout: float) -> bool:
        """Wait until a notification arrives after `seen` was read, or `timeout` passes;
        True if woken.

        The deadline is an `asyncio.timeout` scope, not `asyncio.wait_for`: on Python 3.11,
        `wait_for` returns the inner result when its task is cancelled just as that result
        arrives, so a waiter cancelled then (a client's cancel of an MCP call) went on waiting."""
        await self.start()
        async with self._changed:
            try:
                async with asyncio.timeout(max(timeout, 0.0)):
                    await self._changed.wait_for(lambda: self.count != seen)
            except TimeoutError:
                return False
        return True

    async def _bump(self) -> None:
        async with self._changed:
            self.count += 1
            self._changed.notify_all()

    async def _listen(self) -> None:
        import psycopg

        delay = 0.05
        while True:
            conn: Any = None
            try:
                conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                await conn.execute(f"LISTEN {CHANNEL}")
                await self._bump()  # anything sent while we were not listening
                self.live = True
                self._ready.set()
                delay = 0.05
                async for _ in conn.notifies():
                    await self._bump()
            except psycopg.OperationalError as exc:
                self.live = False
                log.debug("listening for wake-ups failed (%s); retrying", exc)
                self._ready.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                self.live = False
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()


async def pause(
    wake: Wakeups | None, seen: int, poll_seconds: float, longest: float | None = None
) -> None:
    """Until the store may have changed since `seen` was read: a wake-up (a NOTIFY, or the
    long fallback) where the store sends them, else `poll_seconds` (LMDB). `longest`, when
    given, caps the wait for a wake-up (a waiter with a deadline of its own)."""
    if wake is None:
        await asyncio.sleep(poll_seconds)
        return
    fallback = WAKE_FALLBACK_SECONDS if longest is None else min(longest, WAKE_FALLBACK_SECONDS)
    await wake.wait(seen, fallback)
