"""`LLM`: what every native model client shares — one journaled HTTP call per model turn.

A client speaks its provider's HTTP API over `httpx2`, through Pyrula's `AsyncHttpx2Transport`:
inside a run each turn takes the next position of its scope, replays from the journal when one
is recorded there (a changed request raises `ReplayInputChanged`), else goes out live, held to
the run's `AgentLimits` and metered into `llm:done`. The client only encodes the neutral request
and decodes the reply; the providers' modules fill in those two halves.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import httpx2

from pyrula.agents.llm.loop_end import at_loop_end
from pyrula.agents.llm.messages import (
    Delta,
    Message,
    ModelReply,
    OutputSpec,
    Part,
    ToolSpec,
    Usage,
)
from pyrula.errors import ModelHTTPError
from pyrula.replies import rules_for
from pyrula.runtime.calls import LLMRate, ReplayedFailure, acall_frame, areplays, estimate_tokens
from pyrula.transport.framing import SSEDecoder
from pyrula.transport.httpx2_adapters import AsyncHttpx2Transport

# A handler for live stream deltas; it may be sync or async.
DeltaHandler = Callable[[Delta], Awaitable[None] | None]

_RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class _Outcomes:
    """How a journaled failed call replays: as the same `ModelHTTPError`."""

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException:
        status = replayed.record.status
        failure = replayed.record.extra.get("failure")
        if status == 0 and isinstance(failure, dict):
            return ModelHTTPError(
                f"the model call failed in transit: {failure.get('type')}: "
                f"{failure.get('message')}",
                status=0,
            )
        body = replayed.body.decode("utf-8", "replace")
        return ModelHTTPError(
            f"the provider answered {status}: {body[:500]}", status=status, body=body
        )

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None:
        if isinstance(exc, httpx2.TransportError) and not isinstance(exc, httpx2.ConnectError):
            return {"type": type(exc).__name__, "message": str(exc)}
        return None


OUTCOMES = _Outcomes()


class Turn:
    """What a provider builds up from one streamed reply's events (see `LLM.stream_turn`)."""

    def __init__(self, llm: LLM) -> None:
        self._llm = llm
        self._events: list[Any] = []

    def feed(self, event: Any) -> list[Delta]:
        raise NotImplementedError

    def finish(self) -> ModelReply:
        raise NotImplementedError

    def _reply(self, parts: Sequence[Part], stop: str | None, model: str | None) -> ModelReply:
        """The whole reply the events spelled out, with usage read from all of them."""
        return self._llm.reply(parts, stop, model, self._events)


class LLM:
    """A native model client. Subclasses set `surface`, `env_key` and `default_base_url` and
    implement `url`, `headers`, `encode`, `decode` and `stream_turn`.

    `api_key=` (else the provider's usual environment variable), `base_url=` (an
    OpenAI-compatible host, a proxy, a stand-in), `max_retries=` (429 and 5xx replies, sharing
    the call's one journal position), `transport=` (the httpx2 transport that really sends)."""

    surface = ""
    rate_key = ""  # the provider's default `LLMRate` queue, shared with its drop-in
    env_key = ""
    base_url_env = ""  # where the provider's SDK reads a base URL from, if it does
    default_base_url = ""
    # Whether structured output uses the provider's own mode (else a forced tool call).
    native_output = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 1024,
        max_retries: int = 2,
        timeout: float = 120.0,
        transport: httpx2.AsyncBaseTransport | None = None,
        rate_limit: LLMRate | None = None,
    ) -> None:
        self.model = model
        self._api_key = api_key
        from_env = os.environ.get(self.base_url_env) if self.base_url_env else None
        self.base_url = (base_url or from_env or self.default_base_url).rstrip("/")
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self._timeout = timeout
        self._inner = transport
        self._clients: dict[int, httpx2.AsyncClient] = {}
        self._closing: AsyncIterator[None] | None = None  # closes the current client (`_client`)
        self.rate_limit = rate_limit

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    @property
    def api_key(self) -> str:
        key = self._api_key or os.environ.get(self.env_key, "")
        if not key:
            raise ModelHTTPError(
                f"{type(self).__name__} has no API key: pass api_key= or set {self.env_key}",
                status=401,
            )
        return key

    # -- what a provider fills in -------------------------------------------------------------

    def url(self, *, stream: bool) -> str:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def encode(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None,
        tools: Sequence[ToolSpec],
        output: OutputSpec | None,
        stream: bool,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def decode(self, data: Any) -> ModelReply:
        raise NotImplementedError

    def stream_turn(self) -> Turn:
        raise NotImplementedError

    def events(self, decoder: Any, chunk: bytes) -> list[Any]:
        """The parsed events in a chunk of a streamed reply (SSE JSON data by default)."""
        out = []
        for event in decoder.feed(chunk) if chunk else decoder.close():
            if event.data and event.data != "[DONE]":
                out.append(json.loads(event.data))
        return out

    def stream_decoder(self) -> Any:
        return SSEDecoder()

    def prepare(self, request: httpx2.Request) -> httpx2.Request:
        """A last change to the request before it is sent (Bedrock signs it here)."""
        return request

    def reply(
        self, parts: Sequence[Part], stop: str | None, model: str | None, raw: Any
    ) -> ModelReply:
        """A `ModelReply` of `parts`, its usage read from the reply (`raw`: one document, or a
        stream's events)."""
        documents = raw if isinstance(raw, list) else [raw]
        return ModelReply(
            Message("assistant", tuple(parts)), stop, self.usage_of(documents), model, raw
        )

    def usage_of(self, documents: Sequence[Any]) -> Usage:
        found = rules_for(self.surface).usage(documents)
        return Usage(
            found.input_tokens,
            found.output_tokens,
            found.cache_read_tokens,
            found.cache_write_tokens,
        )

    # -- one turn -----------------------------------------------------------------------------

    def _client(self) -> httpx2.AsyncClient:
        # One client per event loop: an httpx2 pool is bound to the loop that opened it. One
        # whose transport is its own is closed as its loop ends (a caller's is theirs to close).
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            transport = AsyncHttpx2Transport(self._inner)
            client = httpx2.AsyncClient(transport=transport, timeout=self._timeout)
            self._clients = {loop: client}
            if self._inner is None:
                self._closing = at_loop_end(functools.partial(self._close, loop, client))
        return client

    async def _close(self, loop: int, client: httpx2.AsyncClient) -> None:
        if self._clients.get(loop) is client:
            del self._clients[loop]
        if not client.is_closed:  # `aclose()` may have closed it first
            await client.aclose()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolSpec] = (),
        output: OutputSpec | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ModelReply:
        """One model turn. With `on_delta` the reply is streamed and each live text or tool
        argument delta reaches it; a turn replayed from the journal is silent."""
        stream = on_delta is not None
        body = self.encode(
            messages, instructions=instructions, tools=tools, output=output, stream=stream
        )
        content = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        async with acall_frame(OUTCOMES) as frame:
            live = not await areplays(frame)
            if self.rate_limit is None or not live:
                return await self._send(content, stream, on_delta if live else None)
            estimate = estimate_tokens(len(content), body)
            async with self.rate_limit.slot(self.rate_key, estimate) as slot:
                reply = await self._send(content, stream, on_delta)
                if not stream:
                    slot.settle(reply.usage.total_tokens)
                return reply

    async def _send(
        self, content: bytes, stream: bool, on_delta: DeltaHandler | None
    ) -> ModelReply:
        """Send the turn (retrying 429 and 5xx replies within the call's one position)."""
        for tries in range(self.max_retries + 1):
            request = httpx2.Request(
                "POST",
                self.url(stream=stream),
                headers={"content-type": "application/json", **self.headers()},
                content=content,
            )
            response = await self._client().send(self.prepare(request), stream=True)
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", "replace")
                await response.aclose()
                if response.status_code in _RETRIED and tries < self.max_retries:
                    await asyncio.sleep(0.25 * 2**tries)
                    continue
                raise ModelHTTPError(
                    f"{type(self).__name__}: the provider answered "
                    f"{response.status_code}: {text[:500]}",
                    status=response.status_code,
                    body=text,
                )
            try:
                if not stream:
                    return self.decode(json.loads(await response.aread()))
                return await self._streamed(response, on_delta)
            finally:
                await response.aclose()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _streamed(
        self, response: httpx2.Response, on_delta: DeltaHandler | None
    ) -> ModelReply:
        turn = self.stream_turn()
        decoder = self.stream_decoder()
        async for chunk in response.aiter_bytes():
            for event in self.events(decoder, chunk):
                for delta in turn.feed(event):
                    if on_delta is not None:
                        result = on_delta(delta)
                        if result is not None:
                            await result
        for event in self.events(decoder, b""):
            turn.feed(event)
        return turn.finish()

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients = {}


def loads_arguments(text: str | None) -> dict[str, Any]:
    """A tool call's JSON arguments as a dict ({} when empty; `{"_raw": text}` when invalid)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"value": value}
