"""HTTP-client wiring: a drop-in's httpx or httpx2 client sends through the journal transport."""

from __future__ import annotations

import sys
from typing import Any

# The journal transport for a client, by the client's own class (openai 3.x takes either stack):
# (HTTP library, its sync client's journal transport, its async client's). A library is looked
# at only when it is already imported, as it is wherever one of its clients exists, so a
# program on httpx2 never imports httpx here.
_STACKS = (
    ("httpx2", "Httpx2Transport", "AsyncHttpx2Transport"),
    ("httpx", "HttpxTransport", "AsyncHttpxTransport"),
)


def _journal_transport_for(client: Any) -> Any:
    # Imported here: the transport stack loads with the first client, not with the drop-in.
    from pyrula.transport import adapters

    for library, sync_name, async_name in _STACKS:
        lib = sys.modules.get(library)
        if lib is None:
            continue
        if isinstance(client, lib.AsyncClient):
            return getattr(adapters, async_name)
        if isinstance(client, lib.Client):
            return getattr(adapters, sync_name)
    return None


def journal_http_client(client: Any, sdk: str) -> None:
    """Route `client`'s transport, and each transport it mounts, through the journal, in place."""
    wrap = _journal_transport_for(client)
    if wrap is None:
        raise TypeError(
            f"http_client must be an httpx or httpx2 Client/AsyncClient, not "
            f"{type(client).__name__}; build it with `{sdk}.DefaultHttpxClient(...)` (or "
            "`DefaultAsyncHttpxClient`) and pass that"
        )
    from pyrula.transport.adapters import JournalTransport

    transport = client._transport
    if not isinstance(transport, JournalTransport):
        client._transport = wrap(transport)
    client._mounts = {
        pattern: (
            mounted if mounted is None or isinstance(mounted, JournalTransport) else wrap(mounted)
        )
        for pattern, mounted in client._mounts.items()
    }
