"""Journaling transports over one core: httpx and httpx2, sync and async, and botocore's hook.

The adapters load on first use: the runtime needs the core and the framing, not the HTTP stacks
(and botocore is an optional dependency).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrula.lazy import lazy_exports

if TYPE_CHECKING:
    from pyrula.transport.botocore import BotocoreHook, journal_botocore
    from pyrula.transport.httpx2_adapters import AsyncHttpx2Transport, Httpx2Transport
    from pyrula.transport.httpx_adapters import AsyncHttpxTransport, HttpxTransport

_WHERE = {
    "AsyncHttpx2Transport": "pyrula.transport.httpx2_adapters",
    "AsyncHttpxTransport": "pyrula.transport.httpx_adapters",
    "Httpx2Transport": "pyrula.transport.httpx2_adapters",
    "HttpxTransport": "pyrula.transport.httpx_adapters",
    "BotocoreHook": "pyrula.transport.botocore",
    "journal_botocore": "pyrula.transport.botocore",
}

__all__ = [
    "AsyncHttpx2Transport",
    "AsyncHttpxTransport",
    "BotocoreHook",
    "Httpx2Transport",
    "HttpxTransport",
    "journal_botocore",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
