"""Calling a `@tool` inside a run: once, journaled like a step, with its approval and limits."""

from __future__ import annotations

from typing import Any

from pyrula.errors import ToolRefused
from pyrula.runtime.attempt import current_attempt, current_scope
from pyrula.runtime.context import ToolContext, WorkflowContext, _call
from pyrula.runtime.registry import ToolDefinition


async def call_tool(
    definition: ToolDefinition[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    tool_call_id: str | None,
) -> Any:
    attempt = current_attempt.get()
    if attempt is None:
        # Outside a run a tool is a plain function call.
        context = [None] if definition.wants_context else []
        return await _call(definition.fn, *context, *args, **kwargs)
    ctx = WorkflowContext(attempt)

    async def before(position: str) -> None:
        # Only a call that runs live is held to its limit and its reviewer; a replayed one
        # already passed both.
        if definition.max_calls is not None:
            made = sum(
                1
                for e in attempt.by_type["tool:done"]
                if e.payload.get("name") == definition.name and e.payload["position"] != position
            )
            if made >= definition.max_calls:
                raise ToolRefused(
                    f"tool {definition.name!r} reached its limit of {definition.max_calls} "
                    "calls in this run"
                )
        if definition.requires_approval:
            verdict = await ctx.interrupt(
                {"approve_tool": definition.name, "arguments": {"args": list(args), **kwargs}},
                _position=f"{position}/approval",
            )
            if verdict not in (True, "approve", "approved", "yes"):
                raise ToolRefused(
                    f"a reviewer declined the call to {definition.name!r}: {verdict!r}"
                )

    def body(*a: Any, **kw: Any) -> Any:
        if not definition.wants_context:
            return definition.fn(*a, **kw)
        tool_ctx = ToolContext(attempt, tool_call_id)
        tool_ctx.idempotency_key = tool_call_id or f"{attempt.run.id}:{current_scope.get().name}"
        return definition.fn(tool_ctx, *a, **kw)

    outer = current_scope.get()
    return await ctx._unit(
        "tool",
        definition.name,
        body,
        args,
        kwargs,
        extra={"tool_call_id": tool_call_id, "called_from": outer.within},
        before=before,
    )
