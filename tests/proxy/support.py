"""Helpers shared by the proxy tests."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pyrula.proxy import BackgroundProxy, Limits, ProxyConfig, Route, background

KEY = "sk-proxy-test-secret-0123456789abcdef"

Client = TypeVar("Client")
_SHARED: dict[tuple[Any, ...], Any] = {}


def shared(make: Callable[..., Client], **kw: Any) -> Client:
    """The HTTP client `make(**kw)` builds, one for a module's tests: building one (and its TLS
    context) for every SDK client would cost more than the exchanges under test. Each is closed
    as its module's tests end (tests/proxy/conftest.py), so its pooled sockets are not left open
    to the interpreter's exit (a ResourceWarning each); the next use opens a new one."""
    key = (make, *sorted(kw.items()))
    if key not in _SHARED:
        _SHARED[key] = make(**kw)
    return _SHARED[key]  # type: ignore[no-any-return]


def close_shared() -> None:
    while _SHARED:
        _SHARED.popitem()[1].close()


@contextmanager
def running(store: Path, mode: str = "record", **kw: Any) -> Iterator[BackgroundProxy]:
    """A proxy on a free loopback port, on a background thread, for the block."""
    limits = kw.pop("limits", Limits(grace_s=2.0))
    with background(ProxyConfig(store=store, mode=mode, port=0, limits=limits, **kw)) as proxy:  # type: ignore[arg-type]
        yield proxy


def routes_to(url: str, *names: str) -> tuple[Route, ...]:
    return tuple(Route(name, url) for name in names or ("openai", "anthropic"))


def raw_exchange(port: int, data: bytes, *, timeout: float = 5.0, half_close: bool = True) -> bytes:
    """Send raw bytes to the proxy and read until it closes (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
        return b"".join(chunks)


def status_of(reply: bytes) -> int | None:
    if not reply.startswith(b"HTTP/1."):
        return None
    return int(reply.split(b" ", 2)[1])


def store_bytes(store: Path) -> bytes:
    return (store / "data.mdb").read_bytes()
