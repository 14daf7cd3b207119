"""Closing what belongs to an event loop as the loop ends.

An `httpx2.AsyncClient`'s pool keeps its connections open, each bound to the loop that opened
it. A native model client makes one HTTP client per loop, so a loop that `asyncio.run` ends
(a worker loop in a notebook or a test, then another) would leave its sockets to the garbage
collector, each an unclosed socket and a `ResourceWarning`. `at_loop_end` runs a coroutine on
the loop while `asyncio.run` (`loop.shutdown_asyncgens()`) shuts it down, so they are closed in
time: it parks an async generator there, and the loop closes every async generator it started
before it stops, running the generator's `finally`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable


def at_loop_end(close: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
    """Have the running loop await `close()` as it shuts down. Keep the returned generator
    while `close` should wait for the loop's end: dropped, it is closed (and `close` run) at
    once."""

    async def parked() -> AsyncIterator[None]:
        try:
            yield
        finally:
            await close()

    generator = parked()
    # Its first step, on the loop, registers it among the loop's async generators.
    asyncio.get_running_loop().create_task(anext(generator))  # type: ignore[arg-type]
    return generator


__all__ = ["at_loop_end"]
