"""Journaling transports for httpx and httpx2, sync and async, over one core.

The adapters load on first use: the runtime needs the core and the framing, not the HTTP stacks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyrula.transport.adapters import (
        AsyncHttpx2Transport,
        AsyncHttpxTransport,
        Httpx2Transport,
        HttpxTransport,
    )

__all__ = ["AsyncHttpx2Transport", "AsyncHttpxTransport", "Httpx2Transport", "HttpxTransport"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'pyrula.transport' has no attribute {name!r}")
    return getattr(importlib.import_module("pyrula.transport.adapters"), name)
