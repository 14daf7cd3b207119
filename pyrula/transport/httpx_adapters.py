"""The httpx (1.x) pair of journaling transports, for openai 2.x, anthropic 0.x and google-genai.

Apart from `base_adapters` so that httpx is imported only by a program whose SDK uses it; the
adapters' logic is shared (`base_adapters.SyncAdapter`, `base_adapters.AsyncAdapter`).
"""

from __future__ import annotations

import httpx

from pyrula.transport.base_adapters import AsyncAdapter, SyncAdapter


class HttpxTransport(SyncAdapter, httpx.BaseTransport):
    """A journaling `httpx` transport (openai 2.x, anthropic 0.x): records or replays each call.

    `inner` is the transport that really sends (default: `httpx.HTTPTransport()`); `session`
    binds it to one cassette, else it follows the cassette or run active where it is called.
    """

    _lib = httpx


class AsyncHttpxTransport(AsyncAdapter, httpx.AsyncBaseTransport):
    """The async twin of `HttpxTransport`."""

    _lib = httpx
