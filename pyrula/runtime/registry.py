"""`@workflow`, `@agent` and `@tool`: durable units, known by name to the workers importing them."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, get_args, overload

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


# Whether a call needs a reviewer: always, never, or decided per call from its arguments.
Approval = bool | Callable[..., bool]

_WRITES_DEPRECATED = (
    "@tool(writes=...) has no effect and will be removed in a later release; delete the "
    "argument (a @tool's result is journaled whatever it writes: put each side effect that must "
    "not run twice in the tool or a ctx.step)"
)


@dataclass(frozen=True)
class ToolDefinition(Generic[P, R]):
    """A `@tool`: its result is journaled like a step's, so a resumed run does not re-run it.

    `context` is what its first parameter's annotation asks for: `"tool"` (a `ToolContext`),
    `"workflow"` (a `WorkflowContext`), or None (no context is passed)."""

    name: str
    fn: Callable[..., Any]
    read_only: bool = False
    requires_approval: Approval = False
    max_calls: int | None = None
    context: str | None = None

    @property
    def wants_context(self) -> bool:
        return self.context is not None

    @property
    def writes(self) -> tuple[str, ...]:
        """Deprecated: always `()`. `@tool(writes=...)` never had an effect (see `tool`)."""
        warnings.warn(_WRITES_DEPRECATED, DeprecationWarning, stacklevel=2)
        return ()

    def needs_approval(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether this call waits for a reviewer: a predicate decides from the call's own
        arguments (the context is not passed to it)."""
        if callable(self.requires_approval):
            return bool(self.requires_approval(*args, **kwargs))
        return bool(self.requires_approval)

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
    requires_approval: Approval = False,
    writes: tuple[str, ...] | list[str] | None = None,
    max_calls: int | None = None,
) -> Callable[[Callable[..., R]], ToolDefinition[..., R]]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    read_only: bool = False,
    requires_approval: Approval = False,
    writes: tuple[str, ...] | list[str] | None = None,
    max_calls: int | None = None,
) -> Any:
    """Make a function a durable tool (`read_only`, `requires_approval`, `max_calls`).

    A first parameter annotated `ToolContext` receives one (with the call's stable
    `idempotency_key`); one annotated `WorkflowContext` or `AgentContext` receives the run's
    context; any other first parameter is an ordinary argument. `requires_approval` is `True`
    (every call parks for a reviewer) or a predicate over the call's arguments. `writes` is
    deprecated: it was stored and never read, and passing it only warns."""
    if writes is not None:
        warnings.warn(_WRITES_DEPRECATED, DeprecationWarning, stacklevel=2)

    def build(f: Callable[..., Any]) -> ToolDefinition[..., Any]:
        definition: ToolDefinition[..., Any] = ToolDefinition(
            name or f.__name__,
            f,
            read_only,
            requires_approval,
            max_calls,
            context_wanted(f),
        )
        return definition

    return build(fn) if fn is not None else build


_CONTEXTS = {"ToolContext": "tool", "WorkflowContext": "workflow", "AgentContext": "workflow"}


def context_wanted(fn: Callable[..., Any]) -> str | None:
    """Which context `fn`'s first parameter is annotated with (see `tool`), by the class or,
    where annotations are strings that cannot be resolved here, by its name."""
    try:
        params = list(inspect.signature(fn, eval_str=True).parameters.values())
    except (NameError, TypeError, SyntaxError):
        params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].annotation is inspect.Parameter.empty:
        return None
    return _context_of(params[0].annotation)


def _context_of(annotation: Any) -> str | None:
    if isinstance(annotation, type):
        for cls in annotation.__mro__:
            if cls.__module__.startswith("pyrula.") and cls.__name__ in _CONTEXTS:
                return _CONTEXTS[cls.__name__]
        return None
    members = get_args(annotation)  # `ToolContext | None` and the like
    if members:
        found = {_context_of(m) for m in members} - {None}
        return found.pop() if len(found) == 1 else None
    text = str(annotation).replace(" ", "")
    if "|" in text:  # an unresolved string union: "ToolContext | None"
        found = {_CONTEXTS.get(part.rpartition(".")[2]) for part in text.split("|")} - {None}
        return found.pop() if len(found) == 1 else None
    return _CONTEXTS.get(text.rpartition(".")[2])
