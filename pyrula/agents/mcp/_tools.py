"""The durable workflow each served tool runs as: one atomic, journaled tool call.

Nothing here imports the `mcp` SDK: a worker that executes the calls needs only this module
(`register_tools`), the server adds the MCP side on top (`_sdk.py`)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from pydantic import TypeAdapter

from pyrula.errors import AtomicToolViolation, ToolRefused, ToolRegistrationError
from pyrula.runtime import (
    AgentContext,
    Definition,
    ToolContext,
    ToolDefinition,
    WorkflowContext,
    tool,
    workflow,
)
from pyrula.runtime.calls import current_run

# A served tool named `charge_card` runs as the workflow `mcp.tool:charge_card`: a stable name,
# so a worker that imports the same tools claims the runs a server submitted.
WORKFLOW_PREFIX = "mcp.tool:"


def workflow_name(tool_name: str) -> str:
    return f"{WORKFLOW_PREFIX}{tool_name}"


class _Atomic:
    """Refuses what a tool body served over MCP cannot do: it is one journaled step, so a
    nested step, a question for a reviewer, a timer, a signal or a child run has no place."""

    def _refuse(self, what: str) -> NoReturn:
        raise AtomicToolViolation(
            f"{what} inside a tool served over MCP: the tool call is one atomic durable step. "
            "Keep steps, interrupts, sleeps, signals and child runs in the workflow or agent "
            "that calls the tool, or split the work into several tools"
        )

    async def step(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("ctx.step")

    async def interrupt(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("ctx.interrupt")

    async def sleep(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("ctx.sleep (a durable timer)")

    async def wait_signal(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("ctx.wait_signal")

    async def send_signal(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("ctx.send_signal")

    async def run_child(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse("ctx.run_child")


class AtomicToolContext(_Atomic, ToolContext):
    """The `ToolContext` a served tool gets: no model turn is bound, so `idempotency_key` and
    `tool_call_id` are None; the run's id (`ctx.run_id`) is stable across a resume."""


class AtomicWorkflowContext(_Atomic, WorkflowContext):
    """The `WorkflowContext` a served tool whose first parameter asks for one gets."""


@dataclass(frozen=True)
class ServedTool:
    """A tool as the server exposes it: its `@tool` definition, the workflow that runs it,
    and the parameters a client passes (the context parameter left out, annotations resolved)."""

    definition: ToolDefinition[..., Any]
    workflow: Definition[..., Any]
    parameters: tuple[inspect.Parameter, ...]
    description: str

    @property
    def name(self) -> str:
        return self.definition.name


def as_definition(item: Any) -> ToolDefinition[..., Any]:
    """A `@tool`, or a plain function made one."""
    if isinstance(item, ToolDefinition):
        return item
    if callable(item) and hasattr(item, "__name__"):
        made: ToolDefinition[..., Any] = tool(item)
        return made
    raise ToolRegistrationError(
        f"{item!r} is not a tool: pass functions or @tool-decorated functions to build_mcp_server"
    )


def client_parameters(definition: ToolDefinition[..., Any]) -> tuple[inspect.Parameter, ...]:
    """The parameters an MCP client fills: the context parameter is the server's to pass."""
    try:
        signature = inspect.signature(definition.fn, eval_str=True)
    except NameError as exc:
        raise ToolRegistrationError(
            f"tool {definition.name!r}: a parameter annotation cannot be resolved ({exc}); "
            "import the types it names at module level"
        ) from exc
    params = list(signature.parameters.values())
    if definition.context is not None:
        params = params[1:]
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolRegistrationError(
                f"tool {definition.name!r}: parameter {param.name!r} cannot be passed by name; "
                "an MCP tool takes named arguments only"
            )
    return tuple(params)


def _check(definition: ToolDefinition[..., Any]) -> None:
    first = next(iter(inspect.signature(definition.fn).parameters.values()), None)
    annotation = getattr(first, "annotation", None)
    named = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if named.rpartition(".")[2] == "AgentContext" or (
        isinstance(annotation, type) and issubclass(annotation, AgentContext)
    ):
        raise ToolRegistrationError(
            f"tool {definition.name!r} asks for an AgentContext: a tool served over MCP is "
            "context-generic (no ctx.llm, no sub-agents). Annotate ToolContext or "
            "WorkflowContext, or serve an agent's tool from the agent instead"
        )
    if definition.requires_approval is True:
        raise ToolRegistrationError(
            f"tool {definition.name!r} has requires_approval=True: a tool served over MCP is "
            "one atomic step and cannot park for a reviewer. Call it from a workflow or agent "
            "(which can wait for approval), or pass a predicate that refuses the risky calls"
        )


def _validated(parameters: tuple[inspect.Parameter, ...], arguments: dict[str, Any]) -> Any:
    """The journaled JSON arguments as the tool's own types (pydantic models, dates, ...)."""
    out: dict[str, Any] = {}
    for param in parameters:
        if param.name not in arguments:
            continue
        value = arguments[param.name]
        if param.annotation is not inspect.Parameter.empty:
            value = TypeAdapter(param.annotation).validate_python(value)
        out[param.name] = value
    return out


def _runner(definition: ToolDefinition[..., Any]) -> Callable[..., Any]:
    """The tool's function with the atomic context a served call gets, where it asks for one.
    A plain (sync) function runs on a thread, so the worker's lease heartbeat goes on."""
    is_async = inspect.iscoroutinefunction(definition.fn)

    def run(**kwargs: Any) -> Any:
        context: list[Any] = []
        if definition.context is not None:
            attempt = current_run().attempt
            assert attempt is not None  # the workflow below runs inside a run
            if definition.context == "tool":
                context = [AtomicToolContext(attempt, None)]
            else:
                context = [AtomicWorkflowContext(attempt)]
        if is_async:
            return definition.fn(*context, **kwargs)
        return asyncio.to_thread(definition.fn, *context, **kwargs)

    return run


def serve(definition: ToolDefinition[..., Any]) -> ServedTool:
    """Check a tool can be served and register the workflow that runs its calls."""
    _check(definition)
    parameters = client_parameters(definition)
    # The call is journaled as this tool's `tool:done`; approval is decided below, per call.
    atomic = dataclasses.replace(
        definition, fn=_runner(definition), context=None, requires_approval=False
    )

    async def body(ctx: WorkflowContext, arguments: dict[str, Any]) -> Any:
        kwargs = _validated(parameters, arguments)
        if definition.needs_approval((), kwargs):
            raise ToolRefused(
                f"tool {definition.name!r} needs a reviewer for these arguments, and a tool "
                "served over MCP cannot wait for one: call it from a workflow or agent instead"
            )
        return await atomic(**kwargs)

    body.__name__ = f"mcp_{definition.name}"
    registered: Definition[..., Any] = workflow(name=workflow_name(definition.name))(body)
    description = inspect.getdoc(definition.fn) or ""
    return ServedTool(definition, registered, parameters, description)


def register_tools(tools: Iterable[Any]) -> list[ServedTool]:
    """Register the workflows that run `tools`' calls, without the MCP SDK: what a worker needs.

    `build_mcp_server` calls this; a worker process imports a module that calls either."""
    served: dict[str, ServedTool] = {}
    for item in tools:
        one = serve(as_definition(item))
        if one.name in served:
            raise ToolRegistrationError(
                f"two tools are named {one.name!r}; give one another name with @tool(name=...)"
            )
        served[one.name] = one
    return list(served.values())
