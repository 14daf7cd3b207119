"""The machinery every Stainless-built drop-in shares (openai, anthropic).

A drop-in is the SDK's own client class, decorated with `drop_in(provider)`: its HTTP client
sends through the journal transport, and its resources route each call through the provider's
surface table. Inside a run a journaled call goes to the SDK untouched (the transport journals
it, one position per SDK call), a passed-through one runs with the run's journal bypassed, and a
refused one raises `UnjournaledSurface` before anything is sent. Outside a run every call passes
through.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sys
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, TypeVar

import httpx
import httpx2

from pyrula.agents.compat._surfaces import SurfaceTable, Verdict
from pyrula.errors import RecordRefused, UnjournaledSurface
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
from pyrula.runtime.media import billable_request_bytes
from pyrula.runtime.ratelimit import LLMRate, Slot, estimate_tokens
from pyrula.transport.adapters import (
    AsyncHttpx2Transport,
    AsyncHttpxTransport,
    Httpx2Transport,
    HttpxTransport,
)
from pyrula.transport.core import current_session

T = TypeVar("T")
C = TypeVar("C", bound=type)


def _unchanged(path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    return kwargs


def _no_refusal(client: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Provider:
    """What the shared machinery needs to know of one SDK."""

    sdk: ModuleType
    table: SurfaceTable
    # Where instructor patches the client (`chat.completions.create`), and how to wrap instead.
    instructor_call: tuple[str, ...]
    instructor_order: str
    # Adjusts a journaled call's arguments before it is sent (OpenAI asks streams for usage).
    prepare: Callable[[str, dict[str, Any]], dict[str, Any]] = _unchanged
    # Why a client cannot journal in a run at all (anthropic's middleware), else None.
    refuse_client: Callable[[Any], str | None] = _no_refusal
    # SDK clients built on a converted one that the drop-in does not convert (yet), by name.
    not_converted: tuple[str, ...] = ()
    drop_ins: list[tuple[type, type]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.sdk.__name__

    @functools.cached_property
    def route(self) -> Route:
        provider = self
        return Route(
            table=self.table,
            journaled=_limited,
            blocking=lambda client, path: not isinstance(
                client, provider.sdk._base_client.AsyncAPIClient
            ),
            refusal=lambda client, path, kwargs: _refused_argument(provider, path, kwargs),
            is_resource=lambda value: _is_resource(value, provider.name),
            prepare=self.prepare,
            refuse_client=self.refuse_client,
        )

    def given(self, value: Any) -> bool:
        sentinels = tuple(
            t for t in (getattr(self.sdk, "NotGiven", None), getattr(self.sdk, "Omit", None)) if t
        )
        return value is not None and not isinstance(value, sentinels)


# -- the HTTP client: its transport (and each one it mounts) sends through the journal ---------

# The journal transport for a client, by the client's own class (openai 3.x takes either stack).
_TRANSPORT_FOR: tuple[tuple[type, type], ...] = (
    (httpx2.AsyncClient, AsyncHttpx2Transport),
    (httpx2.Client, Httpx2Transport),
    (httpx.AsyncClient, AsyncHttpxTransport),
    (httpx.Client, HttpxTransport),
)
_JOURNAL_TRANSPORTS = (AsyncHttpx2Transport, AsyncHttpxTransport, Httpx2Transport, HttpxTransport)


def journal_http_client(client: Any, sdk: str) -> None:
    """Route `client`'s transport, and each transport it mounts, through the journal, in place."""
    wrap = next((t for cls, t in _TRANSPORT_FOR if isinstance(client, cls)), None)
    if wrap is None:
        raise TypeError(
            f"http_client must be an httpx or httpx2 Client/AsyncClient, not "
            f"{type(client).__name__}; build it with `{sdk}.DefaultHttpxClient(...)` (or "
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


def _journaled_http_client(provider: Provider, http_client: Any, *, is_async: bool) -> Any:
    """The caller's client with its transport journaled, else the SDK's default one, journaled."""
    if http_client is None:
        sdk = provider.sdk
        http_client = sdk.DefaultAsyncHttpxClient() if is_async else sdk.DefaultHttpxClient()
    journal_http_client(http_client, provider.name)
    return http_client


# -- calls outside the run's context -----------------------------------------------------------

_warned: set[type] = set()
_warned_sites: set[tuple[str, int]] = set()


def _warn_unjournaled(client: Any) -> None:
    if current_session() is not None:
        return  # a cassette journals the call
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


# -- the surface table, applied to one call ----------------------------------------------------


def _refused_argument(provider: Provider, path: str, kwargs: dict[str, Any]) -> str | None:
    table = provider.table
    for rule in table.refused_arguments:
        if path not in rule.surfaces or rule.argument not in kwargs:
            continue
        value = kwargs[rule.argument]
        if provider.given(value) and rule.refused(value):
            return f"`{path}({rule.argument}=...)` cannot be journaled in a run: {rule.fix}"
    tools: Any = kwargs.get("tools") if path in table.tool_surfaces else None
    for tool in tools if provider.given(tools) else ():
        kind = tool.get("type") if isinstance(tool, dict) else getattr(tool, "type", None)
        if not table.tool_allowed(kind if isinstance(kind, str) else None, tool):
            return (
                f"`{path}` with a tool of type {kind!r} cannot be journaled in a run: "
                f"{table.tool_fix}"
            )
    return None


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


@dataclass(frozen=True)
class Route:
    """What differs between drop-ins when `guarded_call` routes one call through a table."""

    table: SurfaceTable
    # The call, journaled: framed as one call, in a `rate_limit=` slot when the client has one.
    journaled: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any], Any, str], Any]
    # True when the request goes out on the calling thread (a sync client).
    blocking: Callable[[Any, str], bool]
    # Why a journaled call (its arguments, its tools) cannot be journaled in a run, else None.
    refusal: Callable[[Any, str, dict[str, Any]], str | None]
    # Whether an attribute of a resource is itself a resource (guarded in turn), not a value.
    is_resource: Callable[[Any], bool]
    # Adjusts a journaled call's arguments before it is sent.
    prepare: Callable[[str, dict[str, Any]], dict[str, Any]] = _unchanged
    # Why nothing on this client can be journaled in a run (anthropic's middleware), else None.
    refuse_client: Callable[[Any], str | None] = _no_refusal


def guarded_call(
    fn: Callable[..., Any], path: str, client: Any, route: Route
) -> Callable[..., Any]:
    """`fn` (the SDK method at `path`) as the surface table says it runs inside a run."""
    row = route.table.classify(path)
    journaled = row.verdict is Verdict.JOURNALED
    blocking = route.blocking(client, path)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        attempt = current_attempt.get()
        if attempt is None:
            _warn_unjournaled(client)
            if journaled and getattr(client, "_pyrula_rate", None) is not None:
                return route.journaled(fn, args, kwargs, client, path)
            return fn(*args, **kwargs)
        if journaled:
            if blocking:
                attempt.refuse_loop_thread()  # before anything is sent, in a step or tool too
            kwargs = route.prepare(path, kwargs)
        if current_scope.get().within != "run":
            # In a step or tool the unit's result is durable: generation calls are metered by
            # the transport, everything else passes through.
            if journaled:
                return route.journaled(fn, args, kwargs, client, path)
            return _passed_through(fn, args, kwargs)
        refusal = route.refuse_client(client)
        if refusal is not None:
            raise UnjournaledSurface(f"`{path}` cannot be journaled in a run: {refusal}")
        if row.verdict is Verdict.REFUSED:
            raise UnjournaledSurface(
                f"`{path}` cannot be journaled in a run: its replay would call the provider "
                f"live again; {row.fix}"
            )
        if row.verdict is Verdict.PASSED_THROUGH:
            return _passed_through(fn, args, kwargs)
        refusal = route.refusal(client, path, kwargs)
        if refusal is not None:
            raise UnjournaledSurface(refusal)
        return route.journaled(fn, args, kwargs, client, path)

    return call


def _limited(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], client: Any, path: str
) -> Any:
    """A journaled surface's call: framed as one call, inside a `rate_limit=` slot when set."""
    provider: Provider = client._pyrula_provider
    manager = path.endswith(".stream")
    rate = RateCall.of(client, provider.name, kwargs, manager or kwargs.get("stream") is True)
    blocking = not isinstance(client, provider.sdk._base_client.AsyncAPIClient)
    outcomes = _StainlessOutcomes(client)
    return framed(fn, args, kwargs, outcomes, manager=manager, blocking=blocking, rate=rate)


# -- one SDK-level call, one journal position: its outcome, errors included -------------------

_CONNECT_FAILURES = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
)


class Outcomes(Protocol):
    """How one SDK reports a call's outcome: what a journaled failure replays as, and which
    exceptions mean the request had left (so the failure is the call's outcome)."""

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException: ...

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None: ...


@contextlib.contextmanager
def call_frame(outcomes: Outcomes, frame: CallFrame | None = None) -> Iterator[CallFrame]:
    """One journaled SDK call: its retries share a position, and an error it ends in is
    journaled, then raised again on replay without sending anything. Pass `frame` to enter the
    same call again (a stream whose requests go out as it is iterated)."""
    frame = frame if frame is not None else CallFrame()
    token = current_call.set(frame)
    try:
        yield frame
    except ReplayedFailure as replayed:
        raise outcomes.rebuilt(replayed) from None
    except RecordRefused as refused:
        raise refused.error from None
    except BaseException as exc:
        # The SDK gave up: journal a provider error, or a transport failure after the request
        # went out; a failure before sending (a rejected argument, no connection) is not.
        attempt = current_attempt.get()
        if attempt is not None:
            attempt.end_call(frame, outcomes.sent_failure(exc))
        raise
    finally:
        current_call.reset(token)


@dataclass(frozen=True, slots=True)
class RateCall:
    """A call that takes a `rate_limit=` slot when it is sent live (a replay takes none)."""

    rate: LLMRate
    key: str  # the provider's queue, unless the LLMRate names its own
    estimate: int
    streamed: bool  # a stream is charged its estimate: its usage is not reported back

    @staticmethod
    def of(client: Any, key: str, kwargs: dict[str, Any], streamed: bool) -> RateCall | None:
        rate: LLMRate | None = getattr(client, "_pyrula_rate", None)
        if rate is None:
            return None
        size = billable_request_bytes(json.dumps(kwargs, default=str).encode(), f"{key}.")
        return RateCall(rate, key, estimate_tokens(size, kwargs), streamed)

    def settle(self, slot: Slot | None, result: Any) -> None:
        if slot is not None and not self.streamed:
            if isinstance(result, dict):  # boto3
                usage = result.get("usage")
            else:  # google-genai keeps it as `usage_metadata`
                usage = getattr(result, "usage", None) or getattr(result, "usage_metadata", None)
            used = _total_tokens(usage)
            if used is not None:
                slot.settle(used)


def _total_tokens(usage: Any) -> int | None:
    if isinstance(usage, dict):  # Bedrock converse
        total = usage.get("totalTokens")
        return total if isinstance(total, int) else None
    total = getattr(usage, "total_tokens", getattr(usage, "total_token_count", None))
    if isinstance(total, int):
        return total
    counts = [
        getattr(usage, name, None)
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    ]
    found = [c for c in counts if isinstance(c, int)]
    return sum(found) if found else None


def _replays(frame: CallFrame) -> bool:
    attempt = current_attempt.get()
    return attempt is not None and attempt.replays(frame)


@contextlib.contextmanager
def blocking_rate_slot(rate: RateCall | None, frame: CallFrame) -> Iterator[Slot | None]:
    if rate is None or _replays(frame):
        yield None
        return
    attempt = current_attempt.get()
    # Waits through the run's loop; with no run bound it runs unlimited (and warns once).
    loop = attempt.loop if attempt is not None else None
    with rate.rate.blocking_slot(rate.key, rate.estimate, loop) as slot:
        yield slot


@contextlib.asynccontextmanager
async def rate_slot(rate: RateCall | None, frame: CallFrame) -> AsyncIterator[Slot | None]:
    if rate is None or _replays(frame):
        yield None
        return
    async with rate.rate.slot(rate.key, rate.estimate) as slot:
        yield slot


def framed(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    outcomes: Outcomes,
    *,
    manager: bool = False,
    blocking: bool = False,
    rate: RateCall | None = None,
) -> Any:
    """Call `fn` as one journaled call: `manager` when it returns a stream manager whose request
    goes out on entering it, `blocking` for a sync client (its request goes out inside `fn`)."""
    if blocking and not manager:
        with call_frame(outcomes) as frame, blocking_rate_slot(rate, frame) as slot:
            result = fn(*args, **kwargs)
            if rate is not None:
                rate.settle(slot, result)
            return result
    with call_frame(outcomes):
        result = fn(*args, **kwargs)
    if inspect.iscoroutine(result):
        return _framed_async(result, outcomes, rate)
    if manager:
        return _FramedStreamManager(result, outcomes, rate)
    return result


async def _framed_async(awaitable: Awaitable[T], outcomes: Outcomes, rate: RateCall | None) -> T:
    with call_frame(outcomes) as frame:
        async with rate_slot(rate, frame) as slot:
            result = await awaitable
            if rate is not None:
                rate.settle(slot, result)
            return result


class _FramedStreamManager:
    """A `stream(...)` helper's manager, whose request (sent on entering it) is one call."""

    __slots__ = ("_pyrula_manager", "_pyrula_outcomes", "_pyrula_rate")

    def __init__(self, manager: Any, outcomes: Outcomes, rate: RateCall | None) -> None:
        self._pyrula_manager = manager
        self._pyrula_outcomes = outcomes
        self._pyrula_rate = rate

    def __enter__(self) -> Any:
        outcomes, rate = self._pyrula_outcomes, self._pyrula_rate
        with call_frame(outcomes) as frame, blocking_rate_slot(rate, frame):
            return self._pyrula_manager.__enter__()

    def __exit__(self, *exc_info: Any) -> Any:
        return self._pyrula_manager.__exit__(*exc_info)

    async def __aenter__(self) -> Any:
        with call_frame(self._pyrula_outcomes) as frame:
            async with rate_slot(self._pyrula_rate, frame):
                return await self._pyrula_manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._pyrula_manager.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pyrula_manager, name)


class _StainlessOutcomes:
    """Outcomes of the Stainless-built SDKs (openai, anthropic), which share their error model."""

    __slots__ = ("_client",)

    def __init__(self, client: Any) -> None:
        self._client = client

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None:
        sdk = self._client._pyrula_provider.sdk
        if isinstance(exc, sdk.APIConnectionError) and not isinstance(
            exc.__cause__, _CONNECT_FAILURES
        ):
            return {"type": type(exc).__name__, "message": str(exc)}
        return None

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException:
        """The SDK's own exception for a journaled error, on the client's HTTP stack."""
        client = self._client
        sdk = client._pyrula_provider.sdk
        record = replayed.record
        stack = (httpx2.Client, httpx2.AsyncClient)
        lib: Any = httpx2 if isinstance(client._client, stack) else httpx
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
        error = client._make_status_error_from_response(response)
        if not replayed.body:
            error.body = None  # not kept (too large), so not guessed at
        return error  # type: ignore[no-any-return]


# -- guarding a client's resources -------------------------------------------------------------


def _is_resource(value: Any, sdk: str) -> bool:
    # Resources and their `with_raw_response` / `with_streaming_response` views; the cloud
    # clients (anthropic's Bedrock, Vertex) keep theirs under `<sdk>.lib`.
    module = type(value).__module__
    return module.startswith((f"{sdk}.resources", f"{sdk}.lib")) and not callable(value)


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
        client = self._pyrula_client
        route: Route = client._pyrula_route
        if route.is_resource(value):
            return type(self)(value, path, client)
        if callable(value):
            return guarded_call(value, path, client, route)
        return value

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # `isinstance(guard, Messages)` holds, as SDK code that checks its resources expects
        # (google-genai's chats pick sync or async that way); `type(guard)` is still the guard.
        return type(self._pyrula_target)

    def __dir__(self) -> list[str]:
        return dir(self._pyrula_target)

    def __repr__(self) -> str:
        return f"<journaled {self._pyrula_path}: {self._pyrula_target!r}>"


def _guarded_resource(name: str, build: Callable[[Any], Any]) -> functools.cached_property[Any]:
    def guarded(self: Any) -> Any:
        return _Guard(build(self), name, self)

    guarded._pyrula_build = build  # type: ignore[attr-defined]
    prop = functools.cached_property(guarded)
    prop.attrname = name  # what `__set_name__` sets; setattr() after class creation skips it
    return prop


def _resource_names(cls: type) -> dict[str, Callable[[Any], Any]]:
    """The client's class-level resources: the SDK declares each as a `cached_property`."""
    found: dict[str, Callable[[Any], Any]] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, functools.cached_property) and not name.startswith("_"):
                found[name] = getattr(value.func, "_pyrula_build", value.func)
    return found


def _guard_assigned_resources(client: Any) -> None:
    """Resources the SDK assigned in `__init__` (anthropic's Bedrock and Vertex clients) are
    kept, each behind a guard."""
    sdk = client._pyrula_provider.name
    for name, value in list(vars(client).items()):
        if not name.startswith("_") and _is_resource(value, sdk):
            vars(client)[name] = _Guard(value, name, client)


def _pages_bypass(request: Callable[..., Any], page: type) -> Callable[..., Any]:
    """A list page is fetched lazily (on `await`, or when iteration reaches the next page), after
    the guarded call returned; a page is never generation, so its request bypasses the journal."""

    def is_page(cast_to: Any) -> bool:
        return isinstance(cast_to, type) and issubclass(cast_to, page)

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


# Settings the SDK's `copy()` drops on some releases (anthropic 0.x's Bedrock loses its profile).
_KEPT_ON_COPY = ("aws_profile",)


def _journaling_init(init: Callable[..., None], provider: Provider) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(
        self: Any,
        *args: Any,
        http_client: Any = None,
        rate_limit: LLMRate | None = None,
        **kwargs: Any,
    ) -> None:
        is_async = isinstance(self, provider.sdk._base_client.AsyncAPIClient)
        http_client = _journaled_http_client(provider, http_client, is_async=is_async)
        init(self, *args, http_client=http_client, **kwargs)
        self._pyrula_rate = rate_limit
        _guard_assigned_resources(self)

    return __init__


def _journaling_copy(copy: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(copy)
    def copied(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("http_client") is None:
            kwargs["http_client"] = self._client  # some cloud clients' copy() builds a new one
        new = copy(self, *args, **kwargs)
        new._pyrula_rate = self._pyrula_rate
        for name in _KEPT_ON_COPY:
            if getattr(self, name, None) is not None and getattr(new, name, None) is None:
                setattr(new, name, getattr(self, name))
        return new

    return copied


def drop_in(provider: Provider) -> Callable[[C], C]:
    """Make a subclass of an SDK client journal inside a run.

    A mixin base would be tidier, but `journaled()` swaps a built client's class, which needs
    the same instance layout; so a drop-in is a plain subclass, decorated.
    """

    def decorate(cls: C) -> C:
        for name, build in _resource_names(cls).items():
            setattr(cls, name, _guarded_resource(name, build))
        cls.__init__ = _journaling_init(cls.__init__, provider)  # type: ignore[misc]
        cls.copy = cls.with_options = _journaling_copy(cls.copy)  # type: ignore[attr-defined]
        page = provider.sdk._base_client.BasePage
        cls.request = _pages_bypass(cls.request, page)  # type: ignore[attr-defined]
        cls._pyrula_provider = provider  # type: ignore[attr-defined]
        cls._pyrula_route = provider.route  # type: ignore[attr-defined]
        cls._pyrula_journaled = True  # type: ignore[attr-defined]
        return cls

    return decorate


# -- converting a built client -----------------------------------------------------------------

_PROVIDERS: list[Provider] = []
_subclasses: dict[type, type] = {}


def register(provider: Provider, drop_ins: list[tuple[type, type]]) -> None:
    """Declare `provider`'s drop-ins as (SDK class, drop-in class), most derived first."""
    provider.drop_ins[:0] = drop_ins
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)


def _drop_in_for(cls: type) -> tuple[Provider, type]:
    for provider in _PROVIDERS:
        for sdk_cls, drop_in_cls in provider.drop_ins:
            if cls is sdk_cls:
                return provider, drop_in_cls
    for provider in _PROVIDERS:
        unconverted = [k.__name__ for k in cls.__mro__ if k.__name__ in provider.not_converted]
        if unconverted and cls.__module__.startswith(f"{provider.name}."):
            raise TypeError(
                f"journaled() does not convert {provider.name}.{unconverted[0]} clients yet; "
                "use the provider's direct client, or call it inside `ctx.step`"
            )
        for sdk_cls, _ in provider.drop_ins:
            if issubclass(cls, sdk_cls):
                # A caller's own subclass of an SDK client: journal it as itself.
                if cls not in _subclasses:
                    own = type(cls.__name__, (cls,), {"__module__": cls.__module__})
                    _subclasses[cls] = drop_in(provider)(own)
                return provider, _subclasses[cls]
    known = ", ".join(sorted({f"{p.name}.{s.__name__}" for p in _PROVIDERS for s, _ in p.drop_ins}))
    raise TypeError(
        f"journaled() takes a provider SDK client ({known}), not a {cls.__name__}; pass the "
        "client itself, or construct one from pyrula.agents.compat"
    )


def _patched_by_instructor(client: Any) -> bool:
    if type(client).__module__.split(".")[0] == "instructor":
        return True
    for provider in _PROVIDERS:
        target: Any = client
        for name in provider.instructor_call:
            target = getattr(target, "__dict__", {}).get(name)
        if target is not None and getattr(target, "__module__", "").startswith("instructor"):
            return True
    return False


def journaled(client: T, *, rate_limit: LLMRate | None = None) -> T:
    """Convert a built SDK client (openai or anthropic, any of their clouds) in place, and return
    it: from now on its calls journal inside a run (each live one in a `rate_limit` slot).
    A boto3 `bedrock-runtime` client is journaled in place through botocore's hooks, and a
    `google.genai.Client` as `pyrula.agents.compat.genai.journaled` does."""
    modules = [k.__module__ for k in type(client).__mro__]
    if "botocore.client" in modules:
        from pyrula.agents.compat.bedrock import journaled_bedrock

        return journaled_bedrock(client, rate_limit=rate_limit)
    if any(m.startswith("google.genai") for m in modules):
        from pyrula.agents.compat import genai

        return genai.journaled(client, rate_limit=rate_limit)
    if _patched_by_instructor(client):
        orders = "; ".join(p.instructor_order for p in _PROVIDERS)
        raise TypeError(
            "journaled() was handed a client instructor has already wrapped, whose calls would "
            f"skip the journal; pass the provider client first: {orders}"
        )
    if getattr(type(client), "_pyrula_journaled", False):
        if rate_limit is not None:
            client._pyrula_rate = rate_limit  # type: ignore[attr-defined]
        return client
    provider, target = _drop_in_for(type(client))
    journal_http_client(client._client, provider.name)  # type: ignore[attr-defined]
    for name in _resource_names(type(client)):
        vars(client).pop(name, None)  # resources built before the conversion
    client.__class__ = target
    client._pyrula_rate = rate_limit  # type: ignore[attr-defined]
    _guard_assigned_resources(client)
    return client
