"""Blocking the network while a replay-only cassette is active.

An offline suite must fail loudly, not leak: every real sending transport of httpx and httpx2 and
every outbound socket connect raises `NetworkBlocked` while a guard is up. Journaled transports
replaying from the store never reach any of these.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from pyrula.errors import NetworkBlocked

_lock = threading.Lock()
_depth = 0
_allowed: list[set[str]] = []
_originals: dict[tuple[Any, str], Callable[..., Any]] = {}

_FIX = (
    "; record it first (mode='once' or 'new_episodes', or --pyrula-record-mode=once), "
    "or send it through a pyrula transport"
)


def _allowed_host(host: str) -> bool:
    return any(host in hosts for hosts in _allowed)


def _blocked_transport(name: str) -> Callable[..., Any]:
    def handle(self: Any, request: Any) -> Any:
        host = request.url.host
        if not _allowed_host(host):
            # NetworkBlocked is no OSError, so `socket.create_connection` and its kind would
            # not close the socket they made: a blocked one is closed here, useless as it is.
            self.close()
            raise NetworkBlocked(
                f"{request.method} {request.url.copy_with(query=None)} would go to the network "
                f"while a replay-only cassette is active{_FIX}"
            )
        return _originals[(type(self), name)](self, request)

    return handle


def _blocked_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = str(address[0]) if isinstance(address, tuple) else str(address)
        if not _allowed_host(host):
            # NetworkBlocked is no OSError, so `socket.create_connection` and its kind would
            # not close the socket they made: a blocked one is closed here, useless as it is.
            self.close()
            raise NetworkBlocked(
                f"a socket connect to {host} was blocked while a replay-only cassette is active"
                f"{_FIX}"
            )
    return _originals[(socket.socket, "connect")](self, address)


def _targets() -> list[tuple[Any, str, Callable[..., Any]]]:
    import httpx
    import httpx2

    targets: list[tuple[Any, str, Callable[..., Any]]] = [
        (socket.socket, "connect", _blocked_connect)
    ]
    for lib in (httpx, httpx2):
        targets.append((lib.HTTPTransport, "handle_request", _blocked_transport("handle_request")))
        async_handle = _blocked_transport("handle_async_request")

        async def handle_async(self: Any, request: Any, _h: Any = async_handle) -> Any:
            return await _h(self, request)

        targets.append((lib.AsyncHTTPTransport, "handle_async_request", handle_async))
    return targets


def block(allow_hosts: Iterable[str] = ()) -> None:
    """Raise the guard (re-entrant; each `block` needs one `unblock`)."""
    global _depth
    with _lock:
        _allowed.append(set(allow_hosts))
        _depth += 1
        if _depth > 1:
            return
        for owner, name, replacement in _targets():
            _originals[(owner, name)] = getattr(owner, name)
            setattr(owner, name, replacement)


def unblock() -> None:
    global _depth
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        _allowed.pop()
        if _depth:
            return
        for (owner, name), original in _originals.items():
            setattr(owner, name, original)
        _originals.clear()
