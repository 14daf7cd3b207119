"""The Stainless-built drop-ins (openai, anthropic): an SDK client class, subclassed to journal.

A drop-in is the SDK's own client class, decorated with `drop_in(provider)`: its HTTP client
sends through the journal transport, and its resources route each call through the provider's
surface table (see `_guard`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from pyrula.agents.compat._frames import framed
from pyrula.agents.compat._guard import CallRoute, Guard, missing_surface, no_refusal, unchanged
from pyrula.agents.compat._http import journal_http_client
from pyrula.agents.compat._rate_slots import RateCall
from pyrula.agents.compat._surfaces import SurfaceTable
from pyrula.agents.compat.stainless_outcomes import StainlessOutcomes
from pyrula.runtime.calls import (
    LLMRate,
    bypassing,
    passed_through,
)

C = TypeVar("C", bound=type)


def never(client: Any) -> bool:
    """The default `model_alias`: a client's `model` names the model."""
    return False


def nothing_moved(path: str) -> str | None:
    """The default `moved_internal`: every journaled surface works on the installed SDK."""
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
    prepare: Callable[[Any, str, dict[str, Any]], dict[str, Any]] = unchanged
    # Why a client cannot journal in a run at all (anthropic's middleware), else None.
    refuse_client: Callable[[Any], str | None] = no_refusal
    # SDK clients built on a converted one that the drop-in does not convert (yet), by name.
    not_converted: tuple[str, ...] = ()
    # Whether a client's `model` is an alias that names no model (an Azure deployment).
    model_alias: Callable[[Any], bool] = never
    # Why a journaled surface (a helper) cannot journal on the installed SDK, else None.
    moved_internal: Callable[[str], str | None] = nothing_moved
    drop_ins: list[tuple[type, type]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.sdk.__name__

    @functools.cached_property
    def route(self) -> CallRoute:
        provider = self
        return CallRoute(
            table=self.table,
            journaled=_limited,
            blocking=lambda client, path: (
                not isinstance(client, provider.sdk._base_client.AsyncAPIClient)
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


def _journaled_http_client(provider: Provider, http_client: Any, *, is_async: bool) -> Any:
    """The caller's client with its transport journaled, else the SDK's default one, journaled."""
    if http_client is None:
        sdk = provider.sdk
        http_client = sdk.DefaultAsyncHttpxClient() if is_async else sdk.DefaultHttpxClient()
    journal_http_client(http_client, provider.name)
    return http_client


def _refused_argument(provider: Provider, path: str, kwargs: dict[str, Any]) -> str | None:
    moved = provider.moved_internal(path)
    if moved is not None:
        return moved
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


def _limited(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], client: Any, path: str
) -> Any:
    """A journaled surface's call: framed as one call, inside a `rate_limit=` slot when set."""
    provider: Provider = client._pyrula_provider
    manager = path.endswith(".stream")
    streamed = manager or kwargs.get("stream") is True
    rate = RateCall.of(client, provider.name, kwargs, streamed, _request_meta(client, kwargs))
    blocking = not isinstance(client, provider.sdk._base_client.AsyncAPIClient)
    outcomes = StainlessOutcomes(client, provider.sdk)
    return framed(fn, args, kwargs, outcomes, manager=manager, blocking=blocking, rate=rate)


def _request_meta(client: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's model as a request's meta names it (`pyrula.runtime.pricing.deployment`)."""
    model = kwargs.get("model")
    if client._pyrula_provider.model_alias(client):
        return {"model": model, "deployment": model}
    return {"model": model}


def _is_resource(value: Any, sdk: str) -> bool:
    # Resources and their `with_raw_response` / `with_streaming_response` views; the cloud
    # clients (anthropic's Bedrock, Vertex) keep theirs under `<sdk>.lib`.
    # Older releases (anthropic 0.47) assign the raw- and streaming-response views in
    # `__init__`, as classes of `<sdk>._client`.
    module = type(value).__module__
    views = module == f"{sdk}._client" and type(value).__name__.endswith(
        ("WithRawResponse", "WithStreamedResponse")
    )
    return (module.startswith((f"{sdk}.resources", f"{sdk}.lib")) or views) and not callable(value)


def _guarded_resource(name: str, build: Callable[[Any], Any]) -> functools.cached_property[Any]:
    def guarded(self: Any) -> Any:
        return Guard(build(self), name, self)

    guarded._pyrula_build = build  # type: ignore[attr-defined]
    prop = functools.cached_property(guarded)
    prop.attrname = name  # what `__set_name__` sets; setattr() after class creation skips it
    return prop


def resource_names(cls: type) -> dict[str, Callable[[Any], Any]]:
    """The client's class-level resources: the SDK declares each as a `cached_property`."""
    found: dict[str, Callable[[Any], Any]] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, functools.cached_property) and not name.startswith("_"):
                found[name] = getattr(value.func, "_pyrula_build", value.func)
    return found


def guard_assigned_resources(client: Any) -> None:
    """Resources the SDK assigned in `__init__` (anthropic's Bedrock and Vertex clients) are
    kept, each behind a guard."""
    sdk = client._pyrula_provider.name
    for name, value in list(vars(client).items()):
        if not name.startswith("_") and _is_resource(value, sdk):
            vars(client)[name] = Guard(value, name, client)


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
            return await bypassing(request(self, cast_to, *args, **kwargs))

        return fetch_async

    @functools.wraps(request)
    def fetch(self: Any, cast_to: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_page(cast_to):
            return request(self, cast_to, *args, **kwargs)
        return passed_through(request, (self, cast_to, *args), kwargs)

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
        guard_assigned_resources(self)

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


def _missing_surface(self: Any, name: str) -> Any:
    raise missing_surface(self, name)


def drop_in(provider: Provider) -> Callable[[C], C]:
    """Make a subclass of an SDK client journal inside a run.

    A mixin base would be tidier, but `journaled()` swaps a built client's class, which needs
    the same instance layout; so a drop-in is a plain subclass, decorated.
    """

    def decorate(cls: C) -> C:
        for name, build in resource_names(cls).items():
            setattr(cls, name, _guarded_resource(name, build))
        cls.__init__ = _journaling_init(cls.__init__, provider)  # type: ignore[misc]
        cls.copy = cls.with_options = _journaling_copy(cls.copy)  # type: ignore[attr-defined]
        page = provider.sdk._base_client.BasePage
        cls.request = _pages_bypass(cls.request, page)  # type: ignore[attr-defined]
        cls._pyrula_provider = provider  # type: ignore[attr-defined]
        cls._pyrula_route = provider.route  # type: ignore[attr-defined]
        if "__getattr__" not in vars(cls):
            cls.__getattr__ = _missing_surface  # type: ignore[attr-defined]
        cls._pyrula_journaled = True  # type: ignore[attr-defined]
        return cls

    return decorate
