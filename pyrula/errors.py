"""Every error Pyrula raises, in one place. Each message names the fix."""

from __future__ import annotations


class PyrulaError(Exception):
    """Base class of all Pyrula errors."""


class StoreError(PyrulaError):
    """The journal store could not be opened or used."""


class NotAStore(StoreError):
    """The folder exists but holds something other than a Pyrula store."""


class StoreCorrupt(StoreError):
    """The store's files are damaged or not LMDB at all."""


class StoreFormatError(StoreError):
    """The store was written by a newer (or unknown) Pyrula format."""


class PayloadTooLarge(PyrulaError):
    """A record is bigger than the store's per-record cap."""

    def __init__(self, size: int, cap: int, what: str = "record") -> None:
        self.size = size
        self.cap = cap
        super().__init__(
            f"{what} of {size:,} bytes is over the store's per-record cap of {cap:,} bytes; "
            f"raise it with Store(max_record_bytes=...) or PYRULA_MAX_RECORD_BYTES"
        )


class OfflineViolation(BaseException):
    """A replay-only run asked for something it does not have.

    Like pytest's own outcome exceptions this derives from BaseException: SDKs wrap and retry
    any `Exception` raised by their transport (openai 2.x turns it into `APIConnectionError`
    after sleeping through its retries), which would bury the one message that names the fix.
    """


class ReplayMiss(OfflineViolation):
    """A replay-only cassette was asked for a request it never recorded."""

    def __init__(self, message: str, *, nearest: str | None = None, diffs: list[str] | None = None):
        self.nearest = nearest
        self.diffs = diffs or []
        super().__init__(message)


class NetworkBlocked(OfflineViolation):
    """A request tried to reach the network while a replay-only cassette was active."""


class StreamFormatError(PyrulaError):
    """A recorded or live stream could not be framed (malformed or truncated bytes)."""
