"""The httpx2 pair of journaling transports, for openai 3.x, anthropic 2.x and google-genai 3.x.

Apart from `base_adapters` so that httpx2 is imported only by a program whose SDK uses it; the
adapters' logic is shared (`base_adapters.SyncAdapter`, `base_adapters.AsyncAdapter`).
"""

from __future__ import annotations

import httpx2

from pyrula.transport.base_adapters import AsyncAdapter, SyncAdapter


class Httpx2Transport(SyncAdapter, httpx2.BaseTransport):
    """A journaling `httpx2` transport (openai 3.x, anthropic 2.x, google-genai 3.x)."""

    _lib = httpx2


class AsyncHttpx2Transport(AsyncAdapter, httpx2.AsyncBaseTransport):
    """The async twin of `Httpx2Transport`."""

    _lib = httpx2
