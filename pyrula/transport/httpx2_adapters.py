"""The httpx2 pair of journaling transports, for openai 3.x, anthropic 2.x and google-genai 3.x.

Apart from `adapters` so that httpx2 is imported only by a program whose SDK uses it; the
adapters' logic is shared (`adapters._SyncAdapter`, `adapters._AsyncAdapter`).
"""

from __future__ import annotations

import httpx2

from pyrula.transport.adapters import _AsyncAdapter, _SyncAdapter


class Httpx2Transport(_SyncAdapter, httpx2.BaseTransport):
    """A journaling `httpx2` transport (openai 3.x, anthropic 2.x, google-genai 3.x)."""

    _lib = httpx2


class AsyncHttpx2Transport(_AsyncAdapter, httpx2.AsyncBaseTransport):
    """The async twin of `Httpx2Transport`."""

    _lib = httpx2
