"""`@workflow`, `@agent` and `@tool`: durable units, known by name to the workers importing them."""

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
    _REGISTRY[definition.name] = definition
    return definition


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


@dataclass(frozen=True)
class ToolDefinition(Generic[P, R]):
    """A `@tool`: its result is journaled like a step's, so a resumed run does not re-run it."""

    name: str
    fn: Callable[..., Any]
    read_only: bool = False
    requires_approval: bool = False
    writes: tuple[str, ...] = ()
    max_calls: int | None = None
    wants_context: bool = False

    async def __call__(self, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> R:
        from pyrula.runtime.tools import call_tool

        result: R = await call_tool(self, args, kwargs, tool_call_id)
        return result


@overload
def tool(fn: Callable[..., R], /) -> ToolDefinition[..., R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    read_only: bool = False,
    requires_approval: bool = False,
    writes: tuple[str, ...] | list[str] = (),
    max_calls: int | None = None,
) -> Callable[[Callable[..., R]], ToolDefinition[..., R]]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    read_only: bool = False,
    requires_approval: bool = False,
    writes: tuple[str, ...] | list[str] = (),
    max_calls: int | None = None,
) -> Any:
    """Make a function a durable tool (`read_only`, `requires_approval`, `writes`, `max_calls`)."""

    def build(f: Callable[..., Any]) -> ToolDefinition[..., Any]:
        params = list(inspect.signature(f).parameters.values())
        wants = bool(params) and params[0].name in ("ctx", "context")
        definition: ToolDefinition[..., Any] = ToolDefinition(
            name or f.__name__, f, read_only, requires_approval, tuple(writes), max_calls, wants
        )
        return definition

    return build(fn) if fn is not None else build
