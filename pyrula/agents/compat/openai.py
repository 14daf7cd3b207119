"""The OpenAI drop-in: the SDK's own client classes, sending through Pyrula's journal transport.

Inside a run the client's resources route each call through the surface table in `_surfaces`:
a journaled call goes to the SDK untouched (the transport journals it by position), a
passed-through one runs with the run's journal bypassed, a refused one raises
`UnjournaledSurface` before anything is sent. Outside a run every call passes through.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx
import httpx2
import openai
from openai._base_client import BasePage

from pyrula.agents.compat._surfaces import (
    ALLOWED_TOOL_PREFIXES,
    ALLOWED_TOOL_TYPES,
    LOCAL_SHELL_ENVIRONMENTS,
    REFUSED_ARGUMENTS,
    TOOL_FIX,
    TOOL_SURFACES,
    Verdict,
    classify,
)
from pyrula.errors import UnjournaledSurface
from pyrula.runtime.attempt import (
    ERROR_HEADERS,
    CallFrame,
    ReplayedFailure,
    current_attempt,
    current_call,
    current_scope,
    journal_bypass,
    runs_bound,
)
from pyrula.transport.adapters import (
    AsyncHttpx2Transport,
    AsyncHttpxTransport,
    Httpx2Transport,
    HttpxTransport,
)

__all__ = [
    "AsyncAzureOpenAI",
    "AsyncOpenAI",
    "AzureOpenAI",
    "OpenAI",
    "journaled",
]

T = TypeVar("T")

# The journal transport for a client, by the client's own class (openai 3.x takes either stack).
_TRANSPORT_FOR: tuple[tuple[type, type], ...] = (
    (httpx2.AsyncClient, AsyncHttpx2Transport),
    (httpx2.Client, Httpx2Transport),
    (httpx.AsyncClient, AsyncHttpxTransport),
    (httpx.Client, HttpxTransport),
)
_JOURNAL_TRANSPORTS = (AsyncHttpx2Transport, AsyncHttpxTransport, Httpx2Transport, HttpxTransport)


def _journal_http_client(client: Any) -> None:
    """Route `client`'s transport, and each transport it mounts, through the journal, in place."""
    wrap = next((t for cls, t in _TRANSPORT_FOR if isinstance(client, cls)), None)
    if wrap is None:
        raise TypeError(
            f"http_client must be an httpx or httpx2 Client/AsyncClient, not "
            f"{type(client).__name__}; build it with `openai.DefaultHttpxClient(...)` (or "
            "`DefaultAsyncHttpxClient`) and pass that"
        )
    transport = client._transport
    if not isinstance(transport, _JOURNAL_TRANSPORTS):
        client._transport = wrap(transport)
    client._mounts = {
        pattern: (
            mounted
            if mounted is None or isinstance(mounted, _JOURNAL_TRANSPORTS)
            else wrap(mounted)
        )
        for pattern, mounted in client._mounts.items()
    }


# -- guarding the client's resources -----------------------------------------------------------

_warned: set[type] = set()
_warned_sites: set[tuple[str, int]] = set()


def _warn_unjournaled(client: Any) -> None:
    if runs_bound():
        # A run is executing in this process, but this call does not carry its context: a
        # thread started with threading/ThreadPoolExecutor/run_in_executor instead of the run's.
        caller = sys._getframe(2)
        site = (caller.f_code.co_filename, caller.f_lineno)
        if site not in _warned_sites:
            _warned_sites.add(site)
            warnings.warn(
                f"{type(client).__name__} was called on a thread that does not carry the run's "
                "context, so the call is not journaled and runs live again on every resume; "
                "start the thread with `await ctx.to_thread(fn)` or `ctx.map_threads(fn, items)`",
                RuntimeWarning,
                stacklevel=3,
            )
        return
    cls = type(client)
    if cls in _warned:
        return
    _warned.add(cls)
    warnings.warn(
        f"{cls.__name__} was called outside a Pyrula run, so its calls are not journaled; "
        "call it from an @agent or @workflow body to journal them",
        stacklevel=3,
    )


def _given(value: Any) -> bool:
    return value is not None and not isinstance(value, openai.NotGiven | openai.Omit)


def _refused_argument(path: str, kwargs: dict[str, Any]) -> str | None:
    for rule in REFUSED_ARGUMENTS:
        if path not in rule.surfaces or rule.argument not in kwargs:
            continue
        value = kwargs[rule.argument]
        if (value is True) if rule.refused_when == "true" else _given(value):
            return f"`{path}({rule.argument}=...)` cannot be journaled in a run: {rule.fix}"
    tools: Any = kwargs.get("tools") if path in TOOL_SURFACES else None
    for tool in tools if _given(tools) else ():
        kind = tool.get("type") if isinstance(tool, dict) else getattr(tool, "type", None)
        if not isinstance(kind, str) or not _allowed_tool(kind, tool):
            return f"`{path}` with a tool of type {kind!r} cannot be journaled in a run: {TOOL_FIX}"
    return None


_STREAMED_CHAT = ("chat.completions.create", "chat.completions.stream")


def _with_usage(path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Inside an `@agent`, a streamed chat call asks for the usage chunk, so the meter sees it
    (the transport then journals the stream once that chunk has arrived)."""
    attempt = current_attempt.get()
    if attempt is None or not attempt.is_agent or path not in _STREAMED_CHAT:
        return kwargs
    if path.endswith(".create") and kwargs.get("stream") is not True:
        return kwargs
    options = kwargs.get("stream_options")
    options = dict(options) if _given(options) and isinstance(options, dict) else {}
    if options.get("include_usage") is not None:
        return kwargs  # the caller chose
    return {**kwargs, "stream_options": {**options, "include_usage": True}}


def _allowed_tool(kind: str, tool: Any) -> bool:
    if kind.startswith(ALLOWED_TOOL_PREFIXES):
        return True
    if kind not in ALLOWED_TOOL_TYPES:
        return False
    if kind != "shell":
        return True
    environment = tool.get("environment") if isinstance(tool, dict) else None
    if not environment:
        return True
    env_type = environment.get("type") if isinstance(environment, dict) else None
    return env_type in LOCAL_SHELL_ENVIRONMENTS


async def _bypassing(awaitable: Awaitable[T]) -> T:
    token = journal_bypass.set(True)
    try:
        return await awaitable
    finally:
        journal_bypass.reset(token)


def _passed_through(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    token = journal_bypass.set(True)
    try:
        result = fn(*args, **kwargs)
    finally:
        journal_bypass.reset(token)
    if inspect.iscoroutine(result):
        return _bypassing(result)
    return result


def _guarded_call(fn: Callable[..., Any], path: str, client: Any) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if current_attempt.get() is None:
            _warn_unjournaled(client)
            return fn(*args, **kwargs)
        row = classify(path)
        kwargs = _with_usage(path, kwargs)
        if current_scope.get().within != "run":
            # In a step or tool the unit's result is durable: generation calls are metered by
            # the transport, everything else passes through.
            if row.verdict is Verdict.JOURNALED:
                return fn(*args, **kwargs)
            return _passed_through(fn, args, kwargs)
        if row.verdict is Verdict.REFUSED:
            raise UnjournaledSurface(
                f"`{path}` cannot be journaled in a run: its replay would call the provider "
                f"live again; {row.fix}"
            )
        if row.verdict is Verdict.PASSED_THROUGH:
            return _passed_through(fn, args, kwargs)
        refusal = _refused_argument(path, kwargs)
        if refusal is not None:
            raise UnjournaledSurface(refusal)
        return _framed(fn, args, kwargs, client, path)

    return call


# -- one SDK-level call, one journal position: its outcome, errors included -------------------

_CONNECT_FAILURES = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
)


@contextlib.contextmanager
def _call_frame(client: Any) -> Iterator[None]:
    """One journaled SDK call: its retries share a position, and an error it ends in is
    journaled, then raised again on replay without sending anything."""
    frame = CallFrame()
    token = current_call.set(frame)
    try:
        yield
    except ReplayedFailure as replayed:
        raise _rebuilt(client, replayed) from None
    except BaseException as exc:
        _ended(frame, exc)
        raise
    finally:
        current_call.reset(token)


def _framed(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], client: Any, path: str
) -> Any:
    with _call_frame(client):
        result = fn(*args, **kwargs)
    if inspect.iscoroutine(result):
        return _framed_async(result, client)
    if path.endswith(".stream"):
        return _FramedStreamManager(result, client)  # the request goes out on entering it
    return result


async def _framed_async(awaitable: Awaitable[T], client: Any) -> T:
    with _call_frame(client):
        return await awaitable


class _FramedStreamManager:
    """A `stream(...)` helper's manager, whose request (sent on entering it) is one call."""

    __slots__ = ("_pyrula_client", "_pyrula_manager")

    def __init__(self, manager: Any, client: Any) -> None:
        self._pyrula_manager = manager
        self._pyrula_client = client

    def __enter__(self) -> Any:
        with _call_frame(self._pyrula_client):
            return self._pyrula_manager.__enter__()

    def __exit__(self, *exc_info: Any) -> Any:
        return self._pyrula_manager.__exit__(*exc_info)

    async def __aenter__(self) -> Any:
        with _call_frame(self._pyrula_client):
            return await self._pyrula_manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._pyrula_manager.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pyrula_manager, name)


def _ended(frame: CallFrame, exc: BaseException) -> None:
    """The SDK gave up: journal a provider error, or a connection lost after the request went
    out; a failure before sending (a rejected argument, no connection made) is not journaled."""
    attempt = current_attempt.get()
    if attempt is None:
        return
    failure = None
    if isinstance(exc, openai.APIConnectionError) and not isinstance(
        exc.__cause__, _CONNECT_FAILURES
    ):
        failure = {"type": type(exc).__name__, "message": str(exc)}
    attempt.end_call(frame, failure)


def _rebuilt(client: Any, replayed: ReplayedFailure) -> openai.APIError:
    """The SDK's own exception for a journaled error, on the replaying client's HTTP stack."""
    record = replayed.record
    lib: Any = httpx2 if isinstance(client._client, httpx2.Client | httpx2.AsyncClient) else httpx
    request = lib.Request(record.method, record.url.split("?", 1)[0])
    failure = record.extra.get("failure")
    if isinstance(failure, dict):
        cls = getattr(openai, str(failure.get("type")), None)
        if cls is openai.APITimeoutError:
            return openai.APITimeoutError(request=request)
        message = str(failure.get("message") or "Connection error.")
        return openai.APIConnectionError(message=message, request=request)
    headers = [(k, v) for k, v in record.headers if k.lower() in ERROR_HEADERS]
    response = lib.Response(record.status, headers=headers, content=replayed.body, request=request)
    error: openai.APIStatusError = client._make_status_error_from_response(response)
    if not replayed.body:
        error.body = None  # not kept (too large), so not guessed at
    return error


def _is_resource(value: Any) -> bool:
    # Resources and their `with_raw_response` / `with_streaming_response` views.
    return type(value).__module__.startswith("openai.resources") and not callable(value)


class _Guard:
    """Stands in for one SDK resource; routes what is called on it through the surface table."""

    __slots__ = ("_pyrula_client", "_pyrula_path", "_pyrula_target")

    def __init__(self, target: Any, path: str, client: Any) -> None:
        self._pyrula_target = target
        self._pyrula_path = path
        self._pyrula_client = client

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._pyrula_target, name)
        if name.startswith("_"):
            return value
        path = f"{self._pyrula_path}.{name}"
        if _is_resource(value):
            return _Guard(value, path, self._pyrula_client)
        if callable(value):
            return _guarded_call(value, path, self._pyrula_client)
        return value

    def __dir__(self) -> list[str]:
        return dir(self._pyrula_target)

    def __repr__(self) -> str:
        return f"<journaled {self._pyrula_path}: {self._pyrula_target!r}>"


def _guarded_resource(name: str, build: Callable[[Any], Any]) -> functools.cached_property[Any]:
    def guarded(self: Any) -> Any:
        return _Guard(build(self), name, self)

    prop = functools.cached_property(guarded)
    prop.attrname = name  # what `__set_name__` sets; setattr() after class creation skips it
    return prop


def _resource_names(cls: type) -> dict[str, Callable[[Any], Any]]:
    """The client's resources: the SDK declares each as a `cached_property`."""
    found: dict[str, Callable[[Any], Any]] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, functools.cached_property) and not name.startswith("_"):
                found[name] = getattr(value.func, "_pyrula_build", value.func)
    return found


def _journaled_http_client(http_client: Any, *, is_async: bool) -> Any:
    """The caller's client with its transport journaled, else the SDK's default one, journaled."""
    if http_client is None:
        default = openai.DefaultAsyncHttpxClient if is_async else openai.DefaultHttpxClient
        http_client = default()
    _journal_http_client(http_client)
    return http_client


C = TypeVar("C", bound=type)


def _guarded(cls: C) -> C:
    """Guard each resource of a drop-in class (the SDK declares each as a `cached_property`).

    A mixin base would be tidier, but it changes the instance layout and `journaled()` must be
    able to swap a built client's class; so the drop-ins are plain subclasses, decorated.
    """
    for name, build in _resource_names(cls).items():
        prop = _guarded_resource(name, build)
        prop.func._pyrula_build = build  # type: ignore[attr-defined]
        setattr(cls, name, prop)
    cls.request = _pages_bypass(cls.request)  # type: ignore[attr-defined]
    cls._pyrula_journaled = True  # type: ignore[attr-defined]
    return cls


def _pages_bypass(request: Callable[..., Any]) -> Callable[..., Any]:
    """A list page is fetched lazily (on `await`, or when iteration reaches the next page), after
    the guarded call returned; a page is never generation, so its request bypasses the journal."""

    def is_page(cast_to: Any) -> bool:
        return isinstance(cast_to, type) and issubclass(cast_to, BasePage)

    if inspect.iscoroutinefunction(request):

        @functools.wraps(request)
        async def fetch_async(self: Any, cast_to: Any, *args: Any, **kwargs: Any) -> Any:
            if not is_page(cast_to):
                return await request(self, cast_to, *args, **kwargs)
            return await _bypassing(request(self, cast_to, *args, **kwargs))

        return fetch_async

    @functools.wraps(request)
    def fetch(self: Any, cast_to: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_page(cast_to):
            return request(self, cast_to, *args, **kwargs)
        return _passed_through(request, (self, cast_to, *args), kwargs)

    return fetch


@_guarded
class OpenAI(openai.OpenAI):
    """`openai.OpenAI`, journaled inside a run (the sync twin: call it on a thread of the run)."""

    def __init__(self, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(http_client=_journaled_http_client(http_client, is_async=False), **kwargs)


@_guarded
class AsyncOpenAI(openai.AsyncOpenAI):
    """`openai.AsyncOpenAI`, journaled inside a run."""

    def __init__(self, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(http_client=_journaled_http_client(http_client, is_async=True), **kwargs)


@_guarded
class AzureOpenAI(openai.AzureOpenAI):
    """`openai.AzureOpenAI`, journaled inside a run."""

    def __init__(self, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(http_client=_journaled_http_client(http_client, is_async=False), **kwargs)


@_guarded
class AsyncAzureOpenAI(openai.AsyncAzureOpenAI):
    """`openai.AsyncAzureOpenAI`, journaled inside a run."""

    def __init__(self, *, http_client: Any = None, **kwargs: Any) -> None:
        super().__init__(http_client=_journaled_http_client(http_client, is_async=True), **kwargs)


_DROP_INS: list[tuple[type, type]] = [
    (openai.AsyncAzureOpenAI, AsyncAzureOpenAI),
    (openai.AzureOpenAI, AzureOpenAI),
    (openai.AsyncOpenAI, AsyncOpenAI),
    (openai.OpenAI, OpenAI),
]

if hasattr(openai, "BedrockOpenAI"):

    @_guarded
    class BedrockOpenAI(openai.BedrockOpenAI):
        """`openai.BedrockOpenAI`, journaled inside a run."""

        def __init__(self, *, http_client: Any = None, **kwargs: Any) -> None:
            http_client = _journaled_http_client(http_client, is_async=False)
            super().__init__(http_client=http_client, **kwargs)

    @_guarded
    class AsyncBedrockOpenAI(openai.AsyncBedrockOpenAI):
        """`openai.AsyncBedrockOpenAI`, journaled inside a run."""

        def __init__(self, *, http_client: Any = None, **kwargs: Any) -> None:
            http_client = _journaled_http_client(http_client, is_async=True)
            super().__init__(http_client=http_client, **kwargs)

    _DROP_INS[:0] = [
        (openai.AsyncBedrockOpenAI, AsyncBedrockOpenAI),
        (openai.BedrockOpenAI, BedrockOpenAI),
    ]
    __all__ += ["AsyncBedrockOpenAI", "BedrockOpenAI"]

_BEDROCK = ("BedrockOpenAI", "AsyncBedrockOpenAI")


def __getattr__(name: str) -> Any:
    if name in _BEDROCK:
        raise ImportError(
            f"{name} needs an openai release that ships it; the installed openai "
            f"{openai.__version__} does not. Upgrade openai, or test "
            '`hasattr(openai, "BedrockOpenAI")` before importing it'
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_subclasses: dict[type, type] = {}


def _drop_in_for(cls: type) -> type:
    for sdk_cls, drop_in in _DROP_INS:
        if cls is sdk_cls:
            return drop_in
    for sdk_cls, _drop_in in _DROP_INS:
        if issubclass(cls, sdk_cls):
            # A caller's own subclass of an SDK client: journal it as itself.
            if cls not in _subclasses:
                _subclasses[cls] = _guarded(
                    type(cls.__name__, (cls,), {"__module__": cls.__module__})
                )
            return _subclasses[cls]
    raise TypeError(
        f"journaled() takes an openai.OpenAI / AsyncOpenAI / Azure client, not a "
        f"{cls.__name__}; pass the openai client itself, or construct one from "
        "pyrula.agents.compat"
    )


def _patched_by_instructor(client: Any) -> bool:
    if type(client).__module__.split(".")[0] == "instructor":
        return True
    chat = getattr(client, "__dict__", {}).get("chat")
    completions = getattr(chat, "__dict__", {}).get("completions")
    create = getattr(completions, "__dict__", {}).get("create")
    return create is not None and getattr(create, "__module__", "").startswith("instructor")


def journaled(client: T) -> T:
    """Convert a built `openai.OpenAI` / `AsyncOpenAI` / Azure client in place, and return it."""
    if _patched_by_instructor(client):
        raise TypeError(
            "journaled() was handed a client instructor has already wrapped, whose calls would "
            "skip the journal; pass the provider client first: "
            "`instructor.from_openai(journaled(client))`"
        )
    if getattr(type(client), "_pyrula_journaled", False):
        return client
    target = _drop_in_for(type(client))
    _journal_http_client(client._client)  # type: ignore[attr-defined]
    for name in _resource_names(type(client)):
        vars(client).pop(name, None)  # resources built before the conversion
    client.__class__ = target
    return client
