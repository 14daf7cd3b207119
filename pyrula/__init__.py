"""Pyrula: durable AI-agent work, journaled at the HTTP transport layer.

The names below load on first use, so a worker that imports only `pyrula.runtime` does not pay
for the HTTP stacks it never touches, nor a drop-in for cassettes.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pyrula.lazy import lazy_exports

if TYPE_CHECKING:
    from pyrula.cassette import Cassette, VerifyMismatch, cassette
    from pyrula.errors import (
        JournalRefusal,
        LiveBudgetExceeded,
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
    from pyrula.runtime.live_budget import LiveBudget
    from pyrula.transport import (
        AsyncHttpx2Transport,
        AsyncHttpxTransport,
        Httpx2Transport,
        HttpxTransport,
        journal_botocore,
    )

__version__ = "0.1.0"

_WHERE = {
    **dict.fromkeys(("Cassette", "VerifyMismatch", "cassette"), "pyrula.cassette"),
    "Store": "pyrula.journal",
    "LiveBudget": "pyrula.runtime.live_budget",
    "AsyncHttpx2Transport": "pyrula.transport",
    "AsyncHttpxTransport": "pyrula.transport",
    "Httpx2Transport": "pyrula.transport",
    "HttpxTransport": "pyrula.transport",
    "journal_botocore": "pyrula.transport",
    **{
        name: "pyrula.errors"
        for name in (
            "JournalRefusal",
            "LiveBudgetExceeded",
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
    "LiveBudget",
    "LiveBudgetExceeded",
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


class _Package(ModuleType):
    """`pyrula`, whose function `cassette` wins over the submodule of the same name: importing
    `pyrula.cassette` (which sets the package's attribute to the module) keeps the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "cassette" and isinstance(value, ModuleType):
            value = value.cassette
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
