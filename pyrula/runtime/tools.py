"""`@tool`: what a durable tool is (`ToolDefinition`); calling one in a run is `tool_calls.py`."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, get_args, overload

P = ParamSpec("P")
R = TypeVar("R")

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
        # Loaded with the first call, not with the decorator: calling a tool needs the contexts.
        from pyrula.runtime.tool_calls import call_tool

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
