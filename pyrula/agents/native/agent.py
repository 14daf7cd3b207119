"""`Agent`: a durable agent with no body, and `@agent(model=..., tools=...)` bodies with `ctx.llm`.

`Agent(name=..., model=..., tools=[...])` registers an `@agent` whose body is the tool-calling
loop, so it is submitted, worked, resumed, cancelled and forked like any other. An `@agent` body
given a model gets a `NativeContext`: the agent's context plus `ctx.llm` (the model, for one
turn), `ctx.run_loop(prompt)` (the same loop as `Agent`) and `ctx.run_agent(sub, prompt)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, overload

from pyrula.agents.llm.client import LLM, DeltaHandler
from pyrula.agents.llm.messages import Message
from pyrula.agents.native.loop import LoopSpec, Toolbox, run_loop
from pyrula.runtime import AgentContext, AgentLimits, Definition, ToolDefinition
from pyrula.runtime import agent as _runtime_agent

R = TypeVar("R")

_HANDLERS: dict[str, DeltaHandler] = {}


def stream_to(agent_name: str, handler: DeltaHandler | None) -> None:
    """Send the live deltas of agent `agent_name`'s model turns, in this process, to `handler`
    (None stops it). Replayed turns send none."""
    if handler is None:
        _HANDLERS.pop(agent_name, None)
    else:
        _HANDLERS[agent_name] = handler


class NativeContext:
    """An `@agent(model=...)` body's context: everything its `AgentContext` does, plus the
    agent's model and loop."""

    def __init__(self, ctx: AgentContext, spec: LoopSpec, name: str) -> None:
        self._ctx = ctx
        self._spec = spec
        self._name = name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    @property
    def context(self) -> AgentContext:
        return self._ctx

    @property
    def llm(self) -> LLM:
        """The agent's model: `await ctx.llm.complete([Message.user("...")])` is one turn."""
        return self._spec.model

    async def run_loop(
        self,
        prompt: str | Sequence[Message],
        *,
        output_type: Any = None,
        on_delta: DeltaHandler | None = None,
    ) -> Any:
        """Run the agent's tool-calling loop from `prompt` to its final answer."""
        spec = self._spec
        if output_type is not None:
            spec = LoopSpec(
                spec.model,
                spec.instructions,
                spec.toolbox,
                output_type,
                spec.max_turns,
                spec.output_retries,
                spec.mcp_servers,
            )
        handler = on_delta or _HANDLERS.get(self._name)
        return await run_loop(self._ctx, spec, prompt, on_delta=handler)

    async def mcp_tools(self) -> list[ToolDefinition[..., Any]]:
        """The tools of the agent's `mcp_servers`, as `@tool`s to call directly
        (`await tool(city="Oslo")`); their `tools/list` is journaled."""
        from pyrula.agents.native.mcp import mcp_tools

        return [definition for definition, _ in await mcp_tools(self._ctx, self._spec.mcp_servers)]

    async def run_agent(self, sub: Definition[..., Any], prompt: str, **kwargs: Any) -> Any:
        """Run `sub` as a child run (its own journal and limits; cancelled with this run)."""
        return await self._ctx.run_child(sub, prompt, **kwargs)


class Agent(Definition[..., Any]):
    """A durable agent whose body is the tool-calling loop.

    `Agent(name="triage", model=OpenAILLM("gpt-4.1-mini"), instructions="...", tools=[lookup],
    output_type=Verdict, limits=AgentLimits(max_cost_usd=1))`; then `submit(triage, "prompt")`,
    a `pyrula worker`, or `AgentRunner(triage).run_sync("prompt")`. Its result is the final
    text, or the structured value as JSON data. Given in another agent's `tools=`, it runs there
    as a sub-agent: a child run."""

    def __init__(
        self,
        *,
        name: str,
        model: LLM,
        instructions: str | None = None,
        tools: Sequence[Any] = (),
        output_type: Any = None,
        limits: AgentLimits | None = None,
        max_turns: int = 10,
        output_retries: int = 2,
        description: str | None = None,
        mcp_servers: Sequence[Any] | None = None,
    ) -> None:
        spec = LoopSpec(
            model,
            instructions,
            Toolbox.of(tools),
            output_type,
            max_turns,
            output_retries,
            tuple(mcp_servers or ()),
        )

        async def body(ctx: AgentContext, prompt: str) -> Any:
            return await run_loop(ctx, spec, prompt, on_delta=_HANDLERS.get(name))

        body.__name__ = body.__qualname__ = name
        registered = _runtime_agent(name=name, limits=limits)(body)
        options = {"description": description or instructions, "spec": spec}
        super().__init__(name, registered.fn, "agent", limits, options)

    @property
    def spec(self) -> LoopSpec:
        spec: LoopSpec = self.options["spec"]
        return spec


@overload
def agent(fn: Callable[..., Awaitable[R]], /) -> Definition[..., R]: ...
@overload
def agent(
    *,
    name: str | None = None,
    limits: AgentLimits | None = None,
    model: LLM | None = None,
    tools: Sequence[Any] = (),
    instructions: str | None = None,
    max_turns: int = 10,
    mcp_servers: Sequence[Any] | None = None,
) -> Callable[[Callable[..., Awaitable[R]]], Definition[..., R]]: ...
def agent(
    fn: Callable[..., Awaitable[Any]] | None = None,
    /,
    *,
    name: str | None = None,
    limits: AgentLimits | None = None,
    model: LLM | None = None,
    tools: Sequence[Any] = (),
    instructions: str | None = None,
    max_turns: int = 10,
    mcp_servers: Sequence[Any] | None = None,
) -> Any:
    """`pyrula.runtime.agent`, and with `model=` the body's context is a `NativeContext`
    (`ctx.llm`, `ctx.run_loop`, `ctx.run_agent`)."""
    if model is None:
        if tools or mcp_servers:
            raise TypeError("@agent(tools=, mcp_servers=) needs model= too: they are the model's")
        plain = _runtime_agent(name=name, limits=limits)
        return plain(fn) if fn is not None else plain
    spec = LoopSpec(
        model, instructions, Toolbox.of(tools), None, max_turns, 2, tuple(mcp_servers or ())
    )

    def build(f: Callable[..., Awaitable[Any]]) -> Definition[..., Any]:
        agent_name = name or f.__name__

        async def body(ctx: AgentContext, *args: Any, **kwargs: Any) -> Any:
            return await f(NativeContext(ctx, spec, agent_name), *args, **kwargs)

        body.__name__ = body.__qualname__ = agent_name
        return _runtime_agent(name=agent_name, limits=limits)(body)

    return build(fn) if fn is not None else build
