"""`PyrulaDurability`: a Pydantic AI capability that journals an agent's work in a Pyrula run.

```python
agent = Agent(model, capabilities=[PyrulaDurability()], output_type=Verdict)

@agent_(name="triage")                        # pyrula.agents.agent
async def triage(ctx, ticket):
    return (await agent.run(ticket)).output   # model requests and tool calls journaled
```

Built on `pydantic_ai.durable_exec`: the base capability routes every model request, function
tool call and toolset discovery through an operation backend, and this one runs each as a
journaled unit of the current Pyrula run (`_pydantic_ai_units`). Outside a run (or inside a
`ctx.step` or `@tool` body, whose result is already the durable unit) the agent is unchanged.

Streaming is partial by design: a streamed request is one journaled call, so the run's
`event_stream_handler` receives the response's events (no deltas) once the call has completed,
and again, rebuilt from the record, on a replay. A toolset passed to `agent.run(toolsets=...)`
is refused inside a run. `requires_approval` and per-tool limits belong to Pyrula's `@tool`
and do not apply to Pydantic AI tools. Below the `io` capture level the units' results
(model responses, tool returns) and their failures' messages stay out of the run's events, kept
apart for the replay, as for any step. See docs/pydantic-ai.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from dataclasses import dataclass

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    CallableOperationBackend,
    DurabilityEngineSpec,
    DurableOperationId,
    EventStreamHandlerId,
    JournalOperationNamer,
    ModelRequestId,
    RoleBasedOperationConfig,
)
from pydantic_ai.messages import AgentStreamEvent
from pydantic_ai.models import Model
from pydantic_ai.tools import AgentDepsT, RunContext

from pyrula.agents.integrations._pydantic_ai_units import model_request_unit, tool_unit
from pyrula.errors import DurableInvocationCancelled
from pyrula.runtime.calls import current_run

__all__ = ["PyrulaDurability"]


def in_journaled_run() -> bool:
    """Whether a run's body is executing here, outside any step or tool body."""
    run = current_run()
    return run.in_run and run.scope.within == "run" and not run.bypassed


class _PyrulaBackend(CallableOperationBackend[None]):
    """Runs each durable operation as a journaled unit of the current run."""

    def __init__(self, agent_name: str, default_model_id: str | None) -> None:
        config: RoleBasedOperationConfig[None] = RoleBasedOperationConfig(
            model=None, event=None, capability=None, tool=None
        )
        namer = JournalOperationNamer(agent_name, default_model_id=default_model_id or "default")
        super().__init__(namer=namer, config=config)

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: None,
    ) -> object:
        if isinstance(operation_id, EventStreamHandlerId) or not in_journaled_run():
            # The handler runs on every attempt: a replay hands it the rebuilt events again.
            return await body()
        if isinstance(operation_id, ModelRequestId):
            return await model_request_unit(name, operation_id.model_name, cache_key, body)
        return await tool_unit(name, body)


@dataclass(init=False, kw_only=True)
class PyrulaDurability(BaseDurabilityCapability[AgentDepsT]):
    """Makes a Pydantic AI agent durable inside a Pyrula run (`@agent` or `@workflow`).

    Inside a run each model request and function-tool call is a journaled unit: a cancel
    boundary, run once and replayed on resume without calling the provider or the tool. In an
    `@agent` each model call is metered into `llm:done` and held to its `AgentLimits`; a plain
    `@workflow` writes the same `llm:done` and holds no caps. Outside a run the agent is
    unchanged.
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="Pyrula",
        durable_unit_noun="journaled call",
        durable_unit_plural="journaled calls",
        durable_container_noun="run",
        codec=JSON_CODEC,
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=True,
        # Positions are taken in the order calls start: one tool at a time keeps them stable.
        sequential_tools_in_durable_context=True,
        tool_config_key=None,
        cancellation_error_types=(DurableInvocationCancelled,),
    )

    def __init__(
        self,
        *,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        name: str | None = None,
    ) -> None:
        """`name` names the agent's journaled calls (default: the agent's own name); `models`
        registers models a run may switch to; `event_stream_handler` gets each run's events
        (inside a run, a model response's events arrive once its call has completed)."""
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)

    @property
    def in_durable_context(self) -> bool:
        return in_journaled_run()

    def get_durable_operation_backend(self) -> _PyrulaBackend:
        return _PyrulaBackend(self.name or "agent", self.default_model_id)

    def _model_stream_event_handler(self) -> EventStreamHandler[AgentDepsT] | None:
        # Nothing is handed over live inside the journaled call: the events go to the handler
        # from the run's side, after the call, on a replay as on the first run.
        return None if current_run().in_run else super()._model_stream_event_handler()

    async def wrap_run_event_stream(
        self,
        ctx: RunContext[AgentDepsT],
        *,
        stream: AsyncIterable[AgentStreamEvent],
    ) -> AsyncIterable[AgentStreamEvent]:
        if self._effective_event_stream_handler() is None or not in_journaled_run():
            async for event in super().wrap_run_event_stream(ctx, stream=stream):
                yield event
            return
        async for event in stream:
            await self._dispatch_event_stream_event(ctx, event)
            yield event
