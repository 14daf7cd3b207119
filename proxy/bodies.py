"""Request bodies: spooled to disk as they arrive, and loaded into memory within a byte budget.

A body is fingerprinted whole (its canonical form is parsed JSON), so it cannot simply stream
through. Instead it is received into a `Body`, in memory up to `Limits.spool_bytes` and in a
temporary file past that, and is only loaded into memory for its exchange once the shared
`ByteBudget` has room for it. Memory held by request bodies is then about the spool threshold
per connection plus the budget, however many clients send large bodies at once; the rest wait,
on disk.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread


class Body:
    """One request body as it arrives: in memory up to `spool_bytes`, then in a temporary file."""

    def __init__(self, spool_bytes: int) -> None:
        self._spool_bytes = spool_bytes
        self._file = tempfile.SpooledTemporaryFile(max_size=spool_bytes)  # noqa: SIM115
        self.size = 0

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self.size += len(data)

    @property
    def spooled(self) -> bool:
        """Whether it went past the threshold (and so is on disk until loaded)."""
        return self.size > self._spool_bytes

    async def load(self) -> bytes:
        """The whole body as bytes (read off the event loop when it is on disk)."""
        if not self.spooled:
            self._file.seek(0)
            return self._file.read()
        return await anyio.to_thread.run_sync(self._read)

    def _read(self) -> bytes:
        self._file.seek(0)
        return self._file.read()

    def close(self) -> None:
        self._file.close()


class ByteBudget:
    """At most `total` bytes of spooled bodies in memory at once; the rest wait their turn."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self.waiting = 0  # bodies on disk waiting for room
        self._changed = anyio.Condition()

    def describe(self) -> dict[str, int]:
        """What `/_pyrula/health` reports of it."""
        return {"in_memory": self.total - self.free, "limit": self.total, "waiting": self.waiting}

    @asynccontextmanager
    async def hold(self, size: int) -> AsyncIterator[None]:
        """Hold `size` bytes of the budget for the block (a body over the whole budget takes
        all of it, alone)."""
        size = min(size, self.total)
        async with self._changed:
            self.waiting += 1
            try:
                while self.free < size:
                    await self._changed.wait()
            finally:
                self.waiting -= 1
            self.free -= size
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._changed:
                    self.free += size
                    self._changed.notify_all()
