"""The four transports: httpx and httpx2, sync and async, each a thin type translation of the core.

Their shared logic is `base_adapters.py`; each pair lives in a module of its own
(`httpx_adapters`, `httpx2_adapters`) and loads on first use (the names here are looked up
there), so a program imports only the stack its SDK uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrula.lazy import lazy_exports
from pyrula.transport.base_adapters import Adapter

# Any of the four journaling transports, whichever library it serves.
JournalTransport = Adapter

if TYPE_CHECKING:
    from pyrula.transport.httpx2_adapters import AsyncHttpx2Transport, Httpx2Transport
    from pyrula.transport.httpx_adapters import AsyncHttpxTransport, HttpxTransport

# Where each pair lives: importing it imports its stack, so only a program using it gets there.
_MODULE_OF = {
    "HttpxTransport": "pyrula.transport.httpx_adapters",
    "AsyncHttpxTransport": "pyrula.transport.httpx_adapters",
    "Httpx2Transport": "pyrula.transport.httpx2_adapters",
    "AsyncHttpx2Transport": "pyrula.transport.httpx2_adapters",
}


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)


__all__ = [
    "AsyncHttpx2Transport",
    "AsyncHttpxTransport",
    "Httpx2Transport",
    "HttpxTransport",
    "JournalTransport",
]
