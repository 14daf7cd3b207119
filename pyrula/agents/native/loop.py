"""The tool-calling loop: model turn, the tools it asked for, back to the model, until an answer.

Every step of it is durable by what it is made of: a model turn is a journaled call at the next
position of the run (replayed, with its tool calls, on a resume), each tool call a `@tool` unit
(its result journaled, never run twice once finished), each sub-agent a child run, and the final
structured value a step of its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrula.agents.llm.client import LLM, DeltaHandler
from pyrula.agents.llm.messages import Message, OutputSpec, ToolCall, ToolResult, ToolSpec
from pyrula.agents.native.schemas import OutputType, description_of, signature_schema
from pyrula.errors import MaxTurnsExceeded, OutputValidationFailed, RunFailed
from pyrula.runtime import Definition, ToolDefinition, WorkflowContext, tool

OUTPUT_TOOL = "final_result"


@dataclass
class Toolbox:
    """The tools a loop offers: `@tool`s (plain functions become ones) and sub-agents."""

    tools: dict[str, ToolDefinition[..., Any]] = field(default_factory=dict)
    agents: dict[str, Definition[..., Any]] = field(default_factory=dict)
    specs: list[ToolSpec] = field(default_factory=list)

    @classmethod
    def of(cls, items: Sequence[Any]) -> Toolbox:
        box = cls()
        for item in items:
            if isinstance(item, Definition):
                description = str(item.options.get("description") or f"Ask the {item.name} agent.")
                schema = {
                    "type": "object",
                    "properties": {"prompt": {"type": "string"}},
                    "required": ["prompt"],
                }
                box.agents[item.name] = item
                box.specs.append(ToolSpec(item.name, description, schema))
                continue
            definition = item if isinstance(item, ToolDefinition) else tool(item)
            schema = signature_schema(definition.fn, skip_first=definition.wants_context)
            box.tools[definition.name] = definition
            box.specs.append(
                ToolSpec(definition.name, description_of(definition.fn) or definition.name, schema)
            )
        return box

    def with_tools(self, found: Sequence[tuple[ToolDefinition[..., Any], ToolSpec]]) -> Toolbox:
        """This toolbox and `found` (tools with the specs the model sees, MCP's say)."""
        box = Toolbox(dict(self.tools), dict(self.agents), list(self.specs))
        for definition, spec in found:
            box.tools[definition.name] = definition
            box.specs.append(spec)
        return box


@dataclass
class LoopSpec:
    """What one loop runs with."""

    model: LLM
    instructions: str | None = None
    toolbox: Toolbox = field(default_factory=Toolbox)
    output_type: Any = None
    max_turns: int = 10
    output_retries: int = 2
    mcp_servers: Sequence[Any] = ()


async def _call_tool(ctx: WorkflowContext, box: Toolbox, call: ToolCall) -> ToolResult:
    def result(value: Any, is_error: bool = False) -> ToolResult:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return ToolResult(call.id, call.name, text, is_error)

    if call.name in box.agents:
        prompt = str(call.arguments.get("prompt", ""))
        try:
            return result(await ctx.run_child(box.agents[call.name], prompt))
        except RunFailed as exc:  # the sub-agent failed: the model is told
            return result(f"{type(exc).__name__}: {exc}", True)
    definition = box.tools.get(call.name)
    if definition is None:
        return result(f"there is no tool named {call.name!r}", True)
    try:
        return result(await definition(**call.arguments, tool_call_id=call.id))
    except Exception as exc:
        return result(f"{type(exc).__name__}: {exc}", True)


def _with_ids(calls: list[ToolCall], turn: int) -> list[ToolCall]:
    """Calls with an id each (Gemini may send none): stable, as they derive from the reply."""
    return [
        c if c.id else ToolCall(f"call_{turn}_{i}", c.name, c.arguments)
        for i, c in enumerate(calls)
    ]


async def run_loop(
    ctx: WorkflowContext,
    spec: LoopSpec,
    prompt: str | Sequence[Message],
    *,
    on_delta: DeltaHandler | None = None,
) -> Any:
    """Run the loop from `prompt` to the final answer: its text, or its structured value (as
    JSON data when `spec.output_type` is set)."""
    messages = [Message.user(prompt)] if isinstance(prompt, str) else list(prompt)
    output = OutputType(spec.output_type) if spec.output_type is not None else None
    out_spec = (
        OutputSpec(OUTPUT_TOOL, output.schema, native=spec.model.native_output)
        if output is not None
        else None
    )
    box = spec.toolbox
    if spec.mcp_servers:
        from pyrula.agents.native.mcp import mcp_tools

        box = box.with_tools(await mcp_tools(ctx, spec.mcp_servers))
    re_asks = 0
    for turn in range(spec.max_turns):
        reply = await spec.model.complete(
            messages,
            instructions=spec.instructions,
            tools=box.specs,
            output=out_spec,
            on_delta=on_delta,
        )
        calls = _with_ids(reply.tool_calls, turn)
        messages.append(
            Message(
                "assistant",
                (*[p for p in reply.message.parts if not isinstance(p, ToolCall)], *calls),
            )
        )
        answer: Any = None
        answered = False
        if out_spec is not None and not out_spec.native:
            final = [c for c in calls if c.name == OUTPUT_TOOL]
            if final:
                answered, answer = True, final[0].arguments
        elif not calls:
            answered, answer = True, reply.text
        if answered and output is None:
            return answer
        if answered and output is not None:
            try:
                value = output.validate(answer)
            except output.validation_error as exc:
                re_asks += 1
                if re_asks > spec.output_retries:
                    raise OutputValidationFailed(
                        f"the model's structured output stayed invalid after {re_asks - 1} "
                        f"re-asks: {exc}"
                    ) from None
                fix = f"Your answer did not match the schema; fix it:\n{exc}"
                parts: list[ToolResult | str] = [
                    ToolResult(c.id, c.name, fix, True) for c in calls
                ] or [fix]
                messages.append(Message.user(*parts))
                continue
            dumped = output.dump(value)
            return await ctx.step("final_output", _same, dumped)
        results = await asyncio.gather(
            *(_call_tool(ctx, box, c) if c.name != OUTPUT_TOOL else _skipped(c) for c in calls)
        )
        messages.append(Message("user", tuple(results)))
    raise MaxTurnsExceeded(
        f"the agent made {spec.max_turns} model turns without a final answer; raise max_turns= "
        "or give it clearer instructions"
    )


def _same(value: Any) -> Any:
    return value


async def _skipped(call: ToolCall) -> ToolResult:
    return ToolResult(call.id, call.name, "not run", True)
