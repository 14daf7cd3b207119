"""The httpx (1.x) pair of journaling transports, for openai 2.x, anthropic 0.x and google-genai.

Apart from `adapters` so that httpx is imported only by a program whose SDK uses it; the
adapters' logic is shared (`adapters._SyncAdapter`, `adapters._AsyncAdapter`).
"""

from __future__ import annotations

import httpx

from pyrula.transport.adapters import _AsyncAdapter, _SyncAdapter


class HttpxTransport(_SyncAdapter, httpx.BaseTransport):
    """A journaling `httpx` transport (openai 2.x, anthropic 0.x): records or replays each call.

    `inner` is the transport that really sends (default: `httpx.HTTPTransport()`); `session`
    binds it to one cassette, else it follows the cassette or run active where it is called.
    """

    _lib = httpx


class AsyncHttpxTransport(_AsyncAdapter, httpx.AsyncBaseTransport):
    """The async twin of `HttpxTransport`."""

    _lib = httpx
