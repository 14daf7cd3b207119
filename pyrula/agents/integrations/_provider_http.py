"""The provider's own bytes: a LangChain chat model whose SDK client is reachable is journaled at
its HTTP transport, so the journal holds the provider's request and reply (`pyrula journal show`
reads them) and one model call writes one `llm:done`, whether or not the caller had already put
the client on a Pyrula transport.

`ChatOpenAI` keeps its openai client in `root_async_client`, `ChatAnthropic` its anthropic one in
`_async_client`; both are Stainless-built SDKs, which share their error model.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx
import httpx2

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


def journal_transport(client: Any) -> None:
    """Route the SDK client's HTTP client (and each transport it mounts) through the journal, in
    place; a transport that already journals is left as it is (never journaled twice)."""
    http = client._client
    wrap = AsyncHttpx2Transport if isinstance(http, httpx2.AsyncClient) else AsyncHttpxTransport
    if not isinstance(http._transport, _JOURNAL_TRANSPORTS):
        http._transport = wrap(http._transport)
    http._mounts = {
        pattern: (
            mounted
            if mounted is None or isinstance(mounted, _JOURNAL_TRANSPORTS)
            else wrap(mounted)
        )
        for pattern, mounted in http._mounts.items()
    }


class SdkOutcomes:
    """How the chat model's SDK reports a call's outcome (`pyrula.runtime.calls.Outcomes`)."""

    __slots__ = ("_client",)

    def __init__(self, client: Any) -> None:
        self._client = client

    def _sdk(self) -> Any:
        return __import__(type(self._client).__module__.split(".")[0])

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None:
        """A connection failure after the request went out is the call's outcome."""
        sdk = self._sdk()
        connect = (httpx.ConnectError, httpx.ConnectTimeout, httpx2.ConnectError)
        if isinstance(exc, sdk.APIConnectionError) and not isinstance(exc.__cause__, connect):
            return {"type": type(exc).__name__, "message": str(exc)}
        return None

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException:
        """The SDK's own exception for a journaled error, as the live call raised it."""
        client, sdk, record = self._client, self._sdk(), replayed.record
        lib: Any = httpx2 if isinstance(client._client, httpx2.AsyncClient) else httpx
        request = lib.Request(record.method, record.url.split("?", 1)[0])
        failure = record.extra.get("failure")
        if isinstance(failure, dict):
            if failure.get("type") == sdk.APITimeoutError.__name__:
                return sdk.APITimeoutError(request=request)  # type: ignore[no-any-return]
            message = str(failure.get("message") or "Connection error.")
            return sdk.APIConnectionError(message=message, request=request)  # type: ignore[no-any-return]
        headers = [(k, v) for k, v in record.headers if k.lower() in ERROR_HEADERS]
        response = lib.Response(
            record.status, headers=headers, content=replayed.body, request=request
        )
        return client._make_status_error_from_response(response)  # type: ignore[no-any-return]
