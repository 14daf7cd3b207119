"""Time for tests without waiting: a clock that skips ahead, and polling for a condition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


class SkippingClock:
    """Time that jumps ahead by whatever a waiter asks for, and remembers each wait."""

    def __init__(self) -> None:
        self.time = 1000.0
        self.waits: list[float] = []

    def now(self) -> float:
        return self.time

    def call_later(
        self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], None]
    ) -> asyncio.Handle:
        self.waits.append(delay)
        self.time += delay
        return loop.call_soon_threadsafe(callback)


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60) -> None:
    """Poll `condition` (a file, the store) until it holds; fail naming `what` if it never does."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)
