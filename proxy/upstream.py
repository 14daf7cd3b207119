"""Sending a request on to the provider: httpx's async client, real TLS, replies streamed."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from .config import Limits
from .headers import RawHeaders


class Upstream:
    """A pooled HTTP/1.1 client for the providers. Never built in replay mode."""

    def __init__(self, limits: Limits, *, ca_file: Path | None = None) -> None:
        verify: ssl.SSLContext | bool = True
        if ca_file is not None:
            verify = ssl.create_default_context(cafile=str(ca_file))
        self._client = httpx.AsyncClient(
            verify=verify,
            timeout=httpx.Timeout(
                connect=limits.upstream_connect_timeout_s,
                read=limits.upstream_read_timeout_s,
                write=limits.upstream_read_timeout_s,
                pool=limits.upstream_connect_timeout_s,
            ),
            limits=httpx.Limits(
                max_connections=limits.max_connections, max_keepalive_connections=64
            ),
            follow_redirects=False,
        )

    async def open(self, method: str, url: str, headers: RawHeaders, body: bytes) -> httpx.Response:
        """Send and return once the reply's head is in; its body is read by iterating it."""
        if not body:
            request = httpx.Request(method, url, headers=headers, content=body)
            return await self._client.send(request, stream=True)
        stream = _Body(body)
        length = (b"content-length", str(len(body)).encode())
        request = httpx.Request(method, url, headers=[*headers, length], content=stream)
        try:
            return await self._client.send(request, stream=True)
        finally:
            stream.release()  # HTTP/1.1: the body is all sent once the reply's head is in

    async def aclose(self) -> None:
        await self._client.aclose()


class _Body:
    """A request body as httpx sends it, let go of as soon as it is sent. httpx's response and
    its stream refer to each other, so a response (and the request it holds) outlives its
    exchange until the garbage collector runs; a large body must not live on with it."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        data = self._data
        for start in range(0, len(data), _PIECE):
            yield data[start : start + _PIECE]

    def release(self) -> None:
        self._data = b""


_PIECE = 1 << 20

# What a failed upstream call raises: transport errors and bad URLs alike become a 502/504.
UPSTREAM_ERRORS = (httpx.HTTPError, httpx.InvalidURL, OSError)
TIMEOUTS = (httpx.TimeoutException,)
