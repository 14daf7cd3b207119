"""Pyrula: durable AI-agent work, journaled at the HTTP transport layer.

The names below load on first use, so a worker that imports only `pyrula.runtime` does not pay
for the HTTP stacks it never touches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Eager: the function `cassette` must win over the submodule of the same name.
from pyrula.cassette import Cassette, VerifyMismatch, cassette
from pyrula.lazy import lazy_exports

if TYPE_CHECKING:
    from pyrula.errors import (
        JournalRefusal,
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
        journal_botocore,
    )

__version__ = "0.1.0"

_WHERE = {
    "Store": "pyrula.journal",
    "AsyncHttpx2Transport": "pyrula.transport",
    "AsyncHttpxTransport": "pyrula.transport",
    "Httpx2Transport": "pyrula.transport",
    "HttpxTransport": "pyrula.transport",
    "journal_botocore": "pyrula.transport",
    **{
        name: "pyrula.errors"
        for name in (
            "JournalRefusal",
            "NetworkBlocked",
            "NotAStore",
            "OfflineViolation",
            "PayloadTooLarge",
            "PyrulaError",
            "ReplayMiss",
            "StoreCorrupt",
            "StoreError",
            "StoreFormatError",
        )
    },
}

__all__ = [
    "AsyncHttpx2Transport",
    "AsyncHttpxTransport",
    "Cassette",
    "Httpx2Transport",
    "HttpxTransport",
    "JournalRefusal",
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
    "journal_botocore",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
