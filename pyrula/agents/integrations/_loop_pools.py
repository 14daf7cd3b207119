"""A connection pool per event loop.

An httpx transport's pool keeps the connections it opened, each bound to the event loop that
opened it. langchain-openai and langchain-anthropic cache one httpx client per process (an
`lru_cache` on base URL and timeout), so a second `asyncio.run` (a resumed run's next worker
loop, in a notebook or a test) would reuse a connection of the first, closed loop and fail with
`RuntimeError: Event loop is closed`. Each loop therefore sends through a copy of the caller's
transport whose pool is its own; the caller's transport itself is never used nor changed.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pyrula.transport.adapters import JournalTransport

T = TypeVar("T")


def own_pool(transport: Any) -> Any:
    """A copy of `transport` with an empty connection pool of its own; a transport that pools
    nothing httpx's way (`MockTransport`, a transport of your own) is itself."""
    if isinstance(transport, JournalTransport):
        # Pyrula's journaling transport: a copy around a copy of what it sends through (none
        # yet: the copy builds its own on first use).
        clone = copy.copy(transport)
        clone._inner = None if transport._inner is None else own_pool(transport._inner)
        return clone
    pool: Any = getattr(transport, "_pool", None)
    # httpcore's pool (httpx's `AsyncHTTPTransport`, its proxy pools, httpx2's): its mutable
    # state is the list of connections and the list of requests waiting for one.
    if not (hasattr(pool, "_connections") and hasattr(pool, "_requests")):
        return transport
    fresh = copy.copy(pool)
    fresh._connections = []
    fresh._requests = []
    clone = copy.copy(transport)
    clone._pool = fresh
    return clone


class PerLoop(Generic[T]):
    """What `build` makes, once for each running event loop; a closed loop's is dropped when
    another loop asks (its connections then close as they are collected)."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._made: dict[asyncio.AbstractEventLoop, T] = {}
        self._lock = threading.Lock()  # worker threads, each with a loop of its own

    def current(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            made = self._made.get(loop)
            if made is None:
                for closed in [old for old in self._made if old.is_closed()]:
                    del self._made[closed]
                made = self._made[loop] = self._build()
            return made

    def pop_current(self) -> T | None:
        """This loop's, forgotten (it is being closed)."""
        with self._lock:
            return self._made.pop(asyncio.get_running_loop(), None)
