"""Journaling transports for httpx and httpx2, sync and async, over one core."""

from pyrula.transport.adapters import (
    AsyncHttpx2Transport,
    AsyncHttpxTransport,
    Httpx2Transport,
    HttpxTransport,
)

__all__ = ["AsyncHttpx2Transport", "AsyncHttpxTransport", "Httpx2Transport", "HttpxTransport"]
