"""A waiter on the store's wake-ups that is cancelled ends cancelled, whenever the cancel lands."""

from __future__ import annotations

import asyncio

import pytest

from pyrula.journal.wakeups import Wakeups

pytest.importorskip("psycopg")

# Nothing listens there: the listener's connection is refused at once, so `start` returns and
# no notification ever arrives but the one each trial hands in.
NOWHERE = "postgresql://127.0.0.1:1/nothing"


async def _cancelled_after(turns: int) -> str:
    """A wait cancelled `turns` loop turns after a notification began to land: how it ended."""
    wake = Wakeups(NOWHERE)
    await wake.start()
    waiter = asyncio.ensure_future(wake.wait(wake.count, 60.0))
    for _ in range(3):
        await asyncio.sleep(0)  # the waiter is waiting
    # What the listener does when a NOTIFY arrives, done here so it lands at a known turn.
    landing = asyncio.ensure_future(wake._bump())
    for _ in range(turns):
        await asyncio.sleep(0)
    try:
        if waiter.done():
            return "woken before the cancel"
        waiter.cancel()
        try:
            await waiter
        except asyncio.CancelledError:
            return "cancelled"
        return "went on as if woken"
    finally:
        await landing


def test_a_wait_cancelled_as_its_notification_lands_ends_cancelled() -> None:
    # A client's cancel of an MCP call arrives while the call waits here: had the wait gone on
    # as if woken, the call would have kept waiting for its run instead of cancelling it.
    async def trials() -> list[str]:
        return [await _cancelled_after(turns) for turns in range(8)]

    outcomes = asyncio.run(trials())
    assert "went on as if woken" not in outcomes, outcomes
    assert "cancelled" in outcomes and "woken before the cancel" in outcomes, outcomes
