"""`BoundedCache`: recent results kept by their exact key, bounded by the bytes the keys hold.

The replay path keeps two: canonical forms by request (`canonicalize`) and decoded records by
their stored bytes (`journal.exchanges`). A hit compares the whole key, so it is exact; the oldest
entries are dropped first once the budget is spent. Reads take no lock (a dict lookup is atomic);
writes do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A dict of recent values, at most `max_bytes` of keys by `size(key)`, oldest out first."""

    def __init__(self, max_bytes: int, size: Callable[[K], int]) -> None:
        self._max_bytes = max_bytes
        self._size = size
        self._items: dict[K, V] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        size = self._size(key)
        with self._lock:
            if key in self._items:
                return
            while self._items and self._bytes + size > self._max_bytes:
                oldest = next(iter(self._items))
                del self._items[oldest]
                self._bytes -= self._size(oldest)
            self._items[key] = value
            self._bytes += size
