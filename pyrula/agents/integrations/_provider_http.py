"""The provider's own bytes: a LangChain chat model whose SDK client is reachable is journaled at
its HTTP transport, so the journal holds the provider's request and reply (`pyrula journal show`
reads them) and one model call writes one `llm:done`, whether or not the caller had already put
the client on a Pyrula transport.

`ChatOpenAI` keeps its openai client in `root_async_client`, `ChatAnthropic` its anthropic one in
`_async_client`; both are Stainless-built SDKs, which share their error model.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import httpx
import httpx2

from pyrula.agents.compat.stainless_outcomes import StainlessOutcomes
from pyrula.runtime.calls import ERROR_HEADERS, ReplayedFailure
from pyrula.transport import AsyncHttpx2Transport, AsyncHttpxTransport

_JOURNAL_TRANSPORTS = (AsyncHttpxTransport, AsyncHttpx2Transport)
# Where each chat model class keeps its async SDK client, tried in order.
_CLIENT_ATTRIBUTES = ("root_async_client", "_async_client")


def _stainless(client: Any) -> bool:
    return hasattr(client, "_make_status_error_from_response") and isinstance(
        getattr(client, "_client", None), httpx.AsyncClient | httpx2.AsyncClient
    )


def sdk_client_of(model: Any) -> Any | None:
    """The async openai/anthropic client the chat model sends through, else None."""
    for name in _CLIENT_ATTRIBUTES:
        declared = getattr(type(model), name, None)
        if name.startswith("_") and not isinstance(declared, functools.cached_property):
            continue
        try:
            client = getattr(model, name, None)
        except Exception:  # a client that cannot be built here (no key): not this route
            return None
        if client is not None and _stainless(client):
            return client
    return None


def _error_reply(lib: Any, request: Any, replayed: ReplayedFailure) -> Any:
    """The journaled error reply of a failed call, as its transport gave it to the SDK (which
    raises its own exception from it), marked not to be retried: the live call's retries are
    over. A journaled transport failure (no reply) goes on up as it is, for the call frame to
    rebuild as the SDK's exception without the SDK retrying it."""
    record = replayed.record
    if isinstance(record.extra.get("failure"), dict):
        raise replayed
    headers = [
        (k, v)
        for k, v in record.headers
        if k.lower() in ERROR_HEADERS and k.lower() != "x-should-retry"
    ]
    headers.append(("x-should-retry", "false"))
    return lib.Response(record.status, headers=headers, content=replayed.body, request=request)


class _HttpxFailureReplay(httpx.AsyncBaseTransport):
    """Hands a journaled failure to the SDK inside its own call, as the live call got it, so
    the chat model wraps it as it did live (langchain-openai's own error classes)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self.inner.handle_async_request(request)  # type: ignore[no-any-return]
        except ReplayedFailure as replayed:
            return _error_reply(httpx, request, replayed)  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Httpx2FailureReplay(httpx2.AsyncBaseTransport):
    """`_HttpxFailureReplay` for an httpx2 client."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self.inner.handle_async_request(request)  # type: ignore[no-any-return]
        except ReplayedFailure as replayed:
            return _error_reply(httpx2, request, replayed)  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        await self.inner.aclose()


_WRAPPED = (_HttpxFailureReplay, _Httpx2FailureReplay)


def journal_transport(client: Any) -> None:
    """Route the SDK client's HTTP client (and each transport it mounts) through the journal, in
    place; a transport that already journals is not journaled twice."""
    http = client._client
    is_httpx2 = isinstance(http, httpx2.AsyncClient)
    journal = AsyncHttpx2Transport if is_httpx2 else AsyncHttpxTransport
    replay = _Httpx2FailureReplay if is_httpx2 else _HttpxFailureReplay

    def wrap(transport: Any) -> Any:
        if transport is None or isinstance(transport, _WRAPPED):
            return transport
        if not isinstance(transport, _JOURNAL_TRANSPORTS):
            transport = journal(transport)
        return replay(transport)

    http._transport = wrap(http._transport)
    http._mounts = {pattern: wrap(mounted) for pattern, mounted in http._mounts.items()}


def sdk_outcomes(client: Any) -> StainlessOutcomes:
    """How the chat model's SDK client reports a call's outcome (`calls.Outcomes`)."""
    return StainlessOutcomes(client, sys.modules[type(client).__module__.split(".")[0]])
