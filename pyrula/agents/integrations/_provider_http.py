"""The provider's own bytes: a LangChain chat model whose SDK client is reachable is journaled at
its HTTP transport, so the journal holds the provider's request and reply (`pyrula journal show`
reads them) and one model call writes one `llm:done`, whether or not the caller had already put
the client on a Pyrula transport.

`ChatOpenAI` keeps its openai client in `root_async_client`, `ChatAnthropic` its anthropic one in
`_async_client`; both are Stainless-built SDKs, which share their error model. The caller's model
and client are never changed: a journaled call goes through a copy of the model holding a copy
of the client, whose HTTP client sends on a connection pool of the running event loop's own.
"""

from __future__ import annotations

import copy
import functools
import sys
from types import ModuleType
from typing import Any

import httpx
import httpx2

from pyrula.agents.compat.stainless_outcomes import StainlessOutcomes
from pyrula.agents.integrations._loop_pools import PerLoop, own_pool
from pyrula.runtime.calls import ERROR_HEADERS, ReplayedFailure
from pyrula.transport import AsyncHttpx2Transport, AsyncHttpxTransport

_JOURNAL_TRANSPORTS = (AsyncHttpxTransport, AsyncHttpx2Transport)
# Where each chat model class keeps its async SDK client, tried in order.
_CLIENT_ATTRIBUTES = ("root_async_client", "_async_client")


def _stainless(client: Any) -> bool:
    return hasattr(client, "_make_status_error_from_response") and isinstance(
        getattr(client, "_client", None), httpx.AsyncClient | httpx2.AsyncClient
    )


def sdk_client_of(model: Any) -> tuple[str, Any] | None:
    """Where the chat model keeps the async openai/anthropic client it sends through, and that
    client; else None."""
    for name in _CLIENT_ATTRIBUTES:
        declared = getattr(type(model), name, None)
        if name.startswith("_") and not isinstance(declared, functools.cached_property):
            continue
        try:
            client = getattr(model, name, None)
        except Exception:  # a client that cannot be built here (no key): not this route
            return None
        if client is not None and _stainless(client):
            return name, client
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


class _Routed:
    """The caller's transport, copied for the running event loop (`_loop_pools`), under the
    journal; a journaled failure is handed to the SDK inside its own call, as the live call got
    it, so the chat model wraps it as it did live (langchain-openai's own error classes)."""

    _lib: ModuleType

    def __init__(self, transport: Any) -> None:
        journal = AsyncHttpx2Transport if self._lib is httpx2 else AsyncHttpxTransport

        def build() -> Any:
            sent_through = own_pool(transport)
            if isinstance(sent_through, _JOURNAL_TRANSPORTS):  # already journals: not twice
                return sent_through
            return journal(sent_through)

        self._loops = PerLoop(build)

    async def handle_async_request(self, request: Any) -> Any:
        try:
            return await self._loops.current().handle_async_request(request)
        except ReplayedFailure as replayed:
            return _error_reply(self._lib, request, replayed)

    async def aclose(self) -> None:
        closing = self._loops.pop_current()
        if closing is not None:
            await closing.aclose()


class _HttpxRouted(_Routed, httpx.AsyncBaseTransport):
    _lib = httpx


class _Httpx2Routed(_Routed, httpx2.AsyncBaseTransport):
    _lib = httpx2


def journaled_copy(client: Any) -> Any:
    """A copy of the SDK client (its own `copy()`) whose HTTP client, a copy of the caller's,
    sends each request through the journal on a connection pool of the running event loop's
    own. `client` and its HTTP client are left as they are."""
    http = client._client
    routed_cls = _Httpx2Routed if isinstance(http, httpx2.AsyncClient) else _HttpxRouted
    routed = copy.copy(http)
    routed._transport = routed_cls(http._transport)
    routed._mounts = {
        pattern: None if mounted is None else routed_cls(mounted)
        for pattern, mounted in http._mounts.items()
    }
    return client.copy(http_client=routed)


def calling_through(model: Any, name: str, client: Any) -> Any:
    """A shallow copy of the chat model that sends through `client` in place of the one it
    keeps in `name` (`ChatOpenAI`'s `async_client`, its root client's chat completions, follows);
    `model` is left as it is."""
    copied = model.model_copy()
    state = vars(copied)  # a field and a cached_property's value alike live there
    kept = state.get(name)
    state[name] = client
    if name == "root_async_client" and state.get("async_client") is kept.chat.completions:
        state["async_client"] = client.chat.completions
    return copied


def sdk_outcomes(client: Any) -> StainlessOutcomes:
    """How the chat model's SDK client reports a call's outcome (`calls.Outcomes`)."""
    return StainlessOutcomes(client, sys.modules[type(client).__module__.split(".")[0]])
