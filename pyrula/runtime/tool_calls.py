"""Calling a `@tool` inside a run: once, journaled like a step, with its approval and limits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrula.errors import ToolRefused
from pyrula.runtime.calls import current_run
from pyrula.runtime.context import ToolContext, WorkflowContext, call_awaited

if TYPE_CHECKING:
    from pyrula.runtime.tools import ToolDefinition

# The answers (to `pyrula runs answer` or `answer()`) that approve a parked tool call; any other
# answer declines it, and the call raises `ToolRefused`.
APPROVALS = frozenset({"approve", "approved", "yes", "y", "ok"})


def approved(verdict: Any) -> bool:
    """`True`, one of `APPROVALS` (any case), or a mapping with `approved: true`."""
    if isinstance(verdict, dict):
        return verdict.get("approved") is True or verdict.get("approve") is True
    if isinstance(verdict, str):
        return verdict.strip().lower() in APPROVALS
    return verdict is True


async def call_tool(
    definition: ToolDefinition[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    tool_call_id: str | None,
) -> Any:
    attempt = current_run().attempt
    if attempt is None:
        # Outside a run a tool is a plain function call.
        context = [None] if definition.wants_context else []
        return await call_awaited(definition.fn, *context, *args, **kwargs)
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
        if definition.needs_approval(args, kwargs):
            verdict = await ctx.interrupt(
                {"approve_tool": definition.name, "arguments": {"args": list(args), **kwargs}},
                _position=f"{position}/approval",
            )
            if not approved(verdict):
                raise ToolRefused(
                    f"a reviewer declined the call to {definition.name!r}: {verdict!r}"
                )

    def body(*a: Any, **kw: Any) -> Any:
        if definition.context is None:
            return definition.fn(*a, **kw)
        if definition.context == "workflow":
            return definition.fn(ctx, *a, **kw)
        tool_ctx = ToolContext(attempt, tool_call_id)
        tool_ctx.idempotency_key = tool_call_id or f"{attempt.run.id}:{current_run().scope.name}"
        return definition.fn(tool_ctx, *a, **kw)

    outer = current_run().scope
    return await ctx._unit(
        "tool",
        definition.name,
        body,
        args,
        kwargs,
        extra={"tool_call_id": tool_call_id, "called_from": outer.within},
        before=before,
    )
