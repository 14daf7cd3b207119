"""HTTP-client wiring: a drop-in's httpx or httpx2 client sends through the journal transport."""

from __future__ import annotations

from typing import Any

import httpx
import httpx2

from pyrula.transport.adapters import (
    AsyncHttpx2Transport,
    AsyncHttpxTransport,
    Httpx2Transport,
    HttpxTransport,
)

# The journal transport for a client, by the client's own class (openai 3.x takes either stack).
_TRANSPORT_FOR: tuple[tuple[type, type], ...] = (
    (httpx2.AsyncClient, AsyncHttpx2Transport),
    (httpx2.Client, Httpx2Transport),
    (httpx.AsyncClient, AsyncHttpxTransport),
    (httpx.Client, HttpxTransport),
)
_JOURNAL_TRANSPORTS = (AsyncHttpx2Transport, AsyncHttpxTransport, Httpx2Transport, HttpxTransport)


def journal_http_client(client: Any, sdk: str) -> None:
    """Route `client`'s transport, and each transport it mounts, through the journal, in place."""
    wrap = next((t for cls, t in _TRANSPORT_FOR if isinstance(client, cls)), None)
    if wrap is None:
        raise TypeError(
            f"http_client must be an httpx or httpx2 Client/AsyncClient, not "
            f"{type(client).__name__}; build it with `{sdk}.DefaultHttpxClient(...)` (or "
            "`DefaultAsyncHttpxClient`) and pass that"
        )
    transport = client._transport
    if not isinstance(transport, _JOURNAL_TRANSPORTS):
        client._transport = wrap(transport)
    client._mounts = {
        pattern: (
            mounted
            if mounted is None or isinstance(mounted, _JOURNAL_TRANSPORTS)
            else wrap(mounted)
        )
        for pattern, mounted in client._mounts.items()
    }
