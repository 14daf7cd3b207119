"""`@workflow` and `@agent`: run bodies, known by name to the workers importing them (`@tool` is
`tools.py`)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, overload

from pyrula.errors import WorkflowNotRegistered
from pyrula.runtime.limits import AgentLimits

P = ParamSpec("P")
R = TypeVar("R")

_REGISTRY: dict[str, Definition[..., Any]] = {}


@dataclass(frozen=True)
class Definition(Generic[P, R]):
    """A registered run body. Call it with a context to run it inline (as a child would)."""

    name: str
    fn: Callable[..., Awaitable[R]]
    kind: str  # "workflow" or "agent"
    limits: AgentLimits | None = None
    options: dict[str, Any] = field(default_factory=dict)

    async def __call__(self, ctx: Any, *args: Any, **kwargs: Any) -> R:
        return await self.fn(ctx, *args, **kwargs)


def _register(
    fn: Callable[..., Awaitable[R]], kind: str, name: str | None, limits: AgentLimits | None
) -> Definition[..., R]:
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(
            f"@{kind} needs an `async def` taking a context first; {fn.__qualname__} is not async"
        )
    definition: Definition[..., R] = Definition(name or fn.__name__, fn, kind, limits)
    taken = _REGISTRY.get(definition.name)
    if taken is not None and _origin(taken.fn) != _origin(fn):
        # A worker runs a queued run by its name: two bodies under one name would run
        # whichever was imported last. The same function again (a module reloaded, a notebook
        # cell run again) replaces its definition.
        raise ValueError(
            f"a {taken.kind} named {definition.name!r} is already registered "
            f"({_origin(taken.fn)}); give {_origin(fn)} another name (@{kind}(name=...))"
        )
    _REGISTRY[definition.name] = definition
    return definition


def _origin(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


@overload
def workflow(fn: Callable[..., Awaitable[R]], /) -> Definition[..., R]: ...
@overload
def workflow(
    *, name: str | None = None
) -> Callable[[Callable[..., Awaitable[R]]], Definition[..., R]]: ...
def workflow(fn: Any = None, /, *, name: str | None = None) -> Any:
    """Make an async function (taking a `WorkflowContext` first) a durable workflow."""
    if fn is not None:
        return _register(fn, "workflow", name, None)
    return lambda f: _register(f, "workflow", name, None)


@overload
def agent(fn: Callable[..., Awaitable[R]], /) -> Definition[..., R]: ...
@overload
def agent(
    *, name: str | None = None, limits: AgentLimits | None = None
) -> Callable[[Callable[..., Awaitable[R]]], Definition[..., R]]: ...
def agent(fn: Any = None, /, *, name: str | None = None, limits: AgentLimits | None = None) -> Any:
    """Make an async function (taking an `AgentContext` first) a durable agent with caps."""
    if fn is not None:
        return _register(fn, "agent", name, limits)
    return lambda f: _register(f, "agent", name, limits)


def registered() -> frozenset[str]:
    """The names of the workflows and agents this process has imported: what a worker claims."""
    return frozenset(_REGISTRY)


def lookup(name: str) -> Definition[..., Any]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise WorkflowNotRegistered(
            f"no workflow or agent named {name!r} is registered in this process; import the "
            "module that defines it (pyrula worker --import your.module)"
        ) from None
