"""The Gemini drop-in: `from pyrula.agents.compat import genai` replaces `from google import genai`.

`genai.Client` is the SDK's own client class, subclassed: its HTTP clients (sync, and the one
`client.aio` uses) send through the journal transport, and its resources (`models`, `batches`,
`aio.models`, ...) route each call through the Gemini surface table (`_genai_surfaces`). Every
other name (`types`, `errors`, ...) is google-genai's own. The machinery is shared with the
OpenAI and Anthropic drop-ins (`_guard`, `_frames`); what differs is that google-genai's resources
are plain properties, and that its async client sends through aiohttp unless handed a transport.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

import google.genai
import httpx
import httpx2
from google.genai import _common
from google.genai import errors as _errors

from pyrula.agents.compat._genai_surfaces import GENAI, GENERATION, afc_refusal, tools_refusal
from pyrula.agents.compat._guard import CallRoute, Guard, guarded_call, missing_surface
from pyrula.agents.compat._http import journal_http_client
from pyrula.agents.compat._rate_slots import RateCall, blocking_rate_slot, rate_slot
from pyrula.agents.compat._registry import register_converter
from pyrula.runtime.calls import (
    ERROR_HEADERS,
    GEMINI,
    CallFrame,
    LLMRate,
    ReplayedFailure,
    acall_frame,
    call_frame,
)

__all__ = ["Client", "journaled"]

T = TypeVar("T")
_SDK = "google.genai"
_END = object()


def __getattr__(name: str) -> Any:
    """`types`, `errors` and every other name are google-genai's own."""
    try:
        return getattr(google.genai, name)
    except AttributeError:
        return importlib.import_module(f"{_SDK}.{name}")


# -- the HTTP clients: both send through the journal --------------------------------------------

# What an async HTTP client's own transport takes of the arguments the SDK built it with.
_TRANSPORT_ARGS = ("verify", "cert", "trust_env", "http1", "http2", "limits")


def _install_transports(client: google.genai.Client) -> None:
    """Route the client's sync and async HTTP clients through the journal, in place.

    Both end up named in the client's `HttpOptions` too, as if the caller had passed them: the
    SDK then never sends through aiohttp (its async default when that is installed) nor through
    requests (Vertex with an mTLS certificate), which the journal would not see.
    """
    api = client._api_client
    options = api._http_options
    journal_http_client(api._httpx_client, _SDK)
    if options.httpx_client is None:
        options.httpx_client = api._httpx_client
    async_client = api._async_httpx_client
    if async_client is None or getattr(async_client, "_per_loop", False):
        # No client (google-auth's aiohttp session), or google-genai 3.x's pool per event loop,
        # which builds a client per loop from its arguments, past any transport we wrap: build
        # one that sends through a transport of its own.
        lib = httpx2 if isinstance(api._httpx_client, httpx2.Client) else httpx
        args = dict(getattr(api, "_async_httpx_client_args", None) or {})
        transport = lib.AsyncHTTPTransport(**{k: args[k] for k in _TRANSPORT_ARGS if k in args})
        cls = type(async_client) if async_client is not None else lib.AsyncClient
        async_client = api._async_httpx_client = cls(**{**args, "transport": transport})
    journal_http_client(async_client, _SDK)
    options.httpx_async_client = async_client
    if api._use_aiohttp():
        # google-genai before 1.5x asks only `async_client_args` whether to send through aiohttp
        # (when it is installed): name the journaled transport there too.
        transport = async_client._transport
        options.async_client_args = {**(options.async_client_args or {}), "transport": transport}
    for http, hook in ((api._httpx_client, _opened), (async_client, _opened_async)):
        hooks = http.event_hooks
        if hook not in hooks["response"]:
            http.event_hooks = {**hooks, "response": [*hooks["response"], hook]}


# The responses a journaled stream opened: google-genai's generators leave the response open
# when the caller stops early, and only closing it tells the journal the stream was abandoned
# (metered once, as an estimate, and not journaled).
_stream_responses: ContextVar[list[Any] | None] = ContextVar("pyrula_genai_stream", default=None)


def _opened(response: Any) -> None:
    opened = _stream_responses.get()
    if opened is not None:
        opened.append(response)


async def _opened_async(response: Any) -> None:
    _opened(response)


def _stack(client: Any, *, is_async: bool) -> Any:
    api = client._api_client
    http = api._async_httpx_client if is_async else api._httpx_client
    return httpx2 if isinstance(http, httpx2.Client | httpx2.AsyncClient) else httpx


# -- one call's outcome: what a journaled failure replays as -------------------------------------

_NOT_SENT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.UnsupportedProtocol,
    httpx.LocalProtocolError,
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.UnsupportedProtocol,
    httpx2.LocalProtocolError,
)


class _Outcomes:
    """google-genai raises its `APIError` family (`ClientError`, `ServerError`) for an error
    reply, and lets the HTTP stack's own exceptions through for a failed transport."""

    __slots__ = ("_lib",)

    def __init__(self, lib: Any) -> None:
        self._lib = lib

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None:
        transport_errors = (httpx.TransportError, httpx2.TransportError)
        if isinstance(exc, transport_errors) and not isinstance(exc, _NOT_SENT):
            return {"type": type(exc).__name__, "message": str(exc)}
        return None

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException:
        lib, record = self._lib, replayed.record
        request = lib.Request(record.method, record.url.split("?", 1)[0])  # never the `?key=`
        failure = record.extra.get("failure")
        if isinstance(failure, dict):
            cls = getattr(lib, str(failure.get("type")), None)
            if not (isinstance(cls, type) and issubclass(cls, lib.TransportError)):
                cls = lib.TransportError
            return cls(str(failure.get("message") or ""), request=request)  # type: ignore[no-any-return]
        headers = [(k, v) for k, v in record.headers if k.lower() in ERROR_HEADERS]
        response = lib.Response(
            record.status, headers=headers, content=replayed.body, request=request
        )
        try:
            _errors.APIError.raise_for_response(response)
        except _errors.APIError as error:
            return error
        return _errors.APIError(record.status, {}, response)


# -- a journaled call ---------------------------------------------------------------------------


def _plain(reply: Any) -> Any:
    # The HTTP headers of a reply are the transport's, not the model's: a replay does not keep
    # them all, so a journaled reply has none, live or replayed.
    if isinstance(reply, google.genai.types.GenerateContentResponse):
        reply.sdk_http_response = None
    return reply


@contextlib.contextmanager
def _stream_step(outcomes: _Outcomes, frame: CallFrame, opened: list[Any]) -> Iterator[None]:
    token = _stream_responses.set(opened)
    try:
        with call_frame(outcomes, frame):
            yield
    finally:
        _stream_responses.reset(token)


@contextlib.asynccontextmanager
async def _astream_step(
    outcomes: _Outcomes, frame: CallFrame, opened: list[Any]
) -> AsyncIterator[None]:
    token = _stream_responses.set(opened)
    try:
        async with acall_frame(outcomes, frame):
            yield
    finally:
        _stream_responses.reset(token)


class _FramedStream:
    """A sync `generate_content_stream`: its request goes out as it is iterated, so every step
    runs inside the call's frame (and only the step: the caller's code between chunks may make
    calls of its own). `close()` stops it early."""

    __slots__ = ("_chunks", "_frame", "_opened", "_outcomes", "_rate")

    def __init__(
        self, chunks: Iterator[Any], outcomes: _Outcomes, frame: CallFrame, rate: RateCall | None
    ) -> None:
        self._chunks, self._outcomes, self._frame = chunks, outcomes, frame
        self._rate = rate  # taken by the first step, which sends the request
        self._opened: list[Any] = []

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        rate, self._rate = self._rate, None
        with (
            _stream_step(self._outcomes, self._frame, self._opened),
            blocking_rate_slot(rate, self._frame),
        ):
            chunk = next(self._chunks, _END)
        if chunk is _END:
            raise StopIteration
        return _plain(chunk)

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        for response in self._opened:
            response.close()


class _AsyncFramedStream:
    """`client.aio.models.generate_content_stream`'s iterator, each step inside the call's
    frame. `aclose()` stops it early."""

    __slots__ = ("_chunks", "_frame", "_opened", "_outcomes", "_rate")

    def __init__(
        self,
        chunks: AsyncIterator[Any],
        outcomes: _Outcomes,
        frame: CallFrame,
        rate: RateCall | None,
    ) -> None:
        self._chunks, self._outcomes, self._frame = chunks, outcomes, frame
        self._rate = rate  # taken by the first step, which sends the request
        self._opened: list[Any] = []

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        rate, self._rate = self._rate, None
        async with (
            _astream_step(self._outcomes, self._frame, self._opened),
            rate_slot(rate, self._frame),
        ):
            chunk = await anext(self._chunks, _END)
        if chunk is _END:
            raise StopAsyncIteration
        return _plain(chunk)

    async def aclose(self) -> None:
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()
        for response in self._opened:
            await response.aclose()


async def _framed_async(
    awaitable: Any, outcomes: _Outcomes, frame: CallFrame, rate: RateCall | None, stream: bool
) -> Any:
    if stream:  # awaiting it only builds the stream: its first step sends the request
        async with acall_frame(outcomes, frame):
            chunks = await awaitable
        return _AsyncFramedStream(chunks, outcomes, frame, rate)
    async with acall_frame(outcomes, frame), rate_slot(rate, frame) as slot:
        result = await awaitable
        if rate is not None:
            rate.settle(slot, result)
    return _plain(result)


def _journaled_call(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], client: Any, path: str
) -> Any:
    """One SDK call: its retries share one journal position; each hop of an automatic
    continuation (a follow-up request, not a retry) takes the next one."""
    is_async = path.startswith("aio.")
    outcomes = _Outcomes(_stack(client, is_async=is_async))
    stream = path.endswith("_stream")
    rate = RateCall.of(client, GEMINI, kwargs, streamed=stream)
    frame = CallFrame()
    if is_async or stream:
        with call_frame(outcomes, frame):
            result = fn(*args, **kwargs)  # nothing is sent yet: a coroutine, or a generator
        if inspect.iscoroutine(result):
            return _framed_async(result, outcomes, frame, rate, stream)
        return _FramedStream(result, outcomes, frame, rate)
    with call_frame(outcomes, frame), blocking_rate_slot(rate, frame) as slot:
        result = fn(*args, **kwargs)
        if rate is not None:
            rate.settle(slot, result)
    return _plain(result)


def _refusal(client: Any, path: str, kwargs: dict[str, Any]) -> str | None:
    refusal = tools_refusal(kwargs.get("config")) if path in GENERATION else None
    return None if refusal is None else f"`{path}` with {refusal}"


def _unit_refusal(client: Any, path: str, kwargs: dict[str, Any]) -> str | None:
    """Inside a step or tool only automatic function calling is refused: it would send several
    model requests behind one cap check."""
    refusal = afc_refusal(kwargs.get("config")) if path in GENERATION else None
    return None if refusal is None else f"`{path}` inside a step or tool with {refusal}"


_ROUTE = CallRoute(
    table=GENAI,
    journaled=_journaled_call,
    blocking=lambda client, path: not path.startswith("aio."),
    refusal=_refusal,
    is_resource=lambda value: _is_resource(value),
    unit_refusal=_unit_refusal,
)


def _guarded_call(fn: Callable[..., Any], path: str, client: Any) -> Callable[..., Any]:
    return guarded_call(fn, path, client, _ROUTE)


# -- guarding the client's resources ------------------------------------------------------------


def _is_resource(value: Any) -> bool:
    """An SDK resource (`Models`, `AsyncClient`, `Batches`, ...): not a value, not a call."""
    module = type(value).__module__
    is_value = isinstance(value, _common.BaseModel | bool | str)
    return module.startswith(f"{_SDK}.") and not callable(value) and not is_value


class _Guard(Guard):
    """A guarded google-genai resource; `aio.chats` is rebuilt on the guarded `aio.models`."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name == "chats":
            # `aio.chats` builds its chats on the SDK's own `aio.models`: build them on ours.
            chats = getattr(self._pyrula_target, name)
            return type(chats)(modules=self.models)
        return super().__getattr__(name)


# `chats` builds each chat on `self.models`, which is guarded already.
_UNGUARDED = frozenset({"chats", "vertexai"})


def _guarded_property(name: str, prop: property) -> property:
    def get(self: Any) -> Any:
        value = prop.fget(self) if prop.fget is not None else None
        return _Guard(value, name, self) if _is_resource(value) else value

    return property(get, doc=prop.__doc__)


def _journaling(cls: type[T]) -> type[T]:
    """Guard each resource property of a `google.genai.Client` subclass."""
    for klass in reversed(google.genai.Client.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, property) and not name.startswith("_") and name not in _UNGUARDED:
                setattr(cls, name, _guarded_property(name, value))
    cls._pyrula_journaled = True  # type: ignore[attr-defined]
    cls._pyrula_route = _ROUTE  # type: ignore[attr-defined]
    return cls


@_journaling
class Client(google.genai.Client):
    """`google.genai.Client`, journaled inside a run (`client.aio` too). Call the sync client on
    a thread of the run (`await ctx.to_thread(fn)`); every argument is the SDK's own."""

    def __init__(self, *args: Any, rate_limit: LLMRate | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pyrula_rate = rate_limit
        _install_transports(self)

    def __getattr__(self, name: str) -> Any:
        raise missing_surface(self, name)


# -- converting a built client -------------------------------------------------------------------

_subclasses: dict[type, type] = {}


def journaled(client: T, *, rate_limit: LLMRate | None = None) -> T:
    """Convert a built `google.genai.Client` in place, and return it: from now on its calls (and
    those of `client.aio`, read after this) journal inside a run."""
    if type(client).__module__.split(".")[0] == "instructor":
        raise TypeError(
            "journaled() was handed an instructor client, whose calls would skip the journal; "
            "pass the google-genai client first: `instructor.from_genai(journaled(client))`"
        )
    if not isinstance(client, google.genai.Client):
        raise TypeError(
            f"journaled() takes a google.genai.Client, not a {type(client).__name__}; pass the "
            "client itself, or build one with `pyrula.agents.compat.genai.Client(...)`"
        )
    cls = type(client)
    if not getattr(cls, "_pyrula_journaled", False):
        if cls is google.genai.Client:
            target: type = Client
        else:  # a caller's own subclass: journal it as itself
            if cls not in _subclasses:
                own = type(cls.__name__, (cls,), {"__module__": cls.__module__})
                _subclasses[cls] = _journaling(own)
            target = _subclasses[cls]
        client.__class__ = target
    client._pyrula_rate = rate_limit  # type: ignore[attr-defined]
    _install_transports(client)
    return client


register_converter("google.genai", journaled)
