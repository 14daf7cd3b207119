"""Pyrula: durable AI-agent work, journaled at the HTTP transport layer."""

from pyrula.cassette import Cassette, VerifyMismatch, cassette
from pyrula.errors import (
    NetworkBlocked,
    NotAStore,
    OfflineViolation,
    PayloadTooLarge,
    PyrulaError,
    ReplayMiss,
    StoreCorrupt,
    StoreError,
    StoreFormatError,
)
from pyrula.journal import Store
from pyrula.transport import (
    AsyncHttpx2Transport,
    AsyncHttpxTransport,
    Httpx2Transport,
    HttpxTransport,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncHttpx2Transport",
    "AsyncHttpxTransport",
    "Cassette",
    "Httpx2Transport",
    "HttpxTransport",
    "NetworkBlocked",
    "NotAStore",
    "OfflineViolation",
    "PayloadTooLarge",
    "PyrulaError",
    "ReplayMiss",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "StoreFormatError",
    "VerifyMismatch",
    "cassette",
]
