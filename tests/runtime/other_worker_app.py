"""A workflow only some workers import (`pyrula worker --import tests.runtime.other_worker_app`)."""

from __future__ import annotations

from typing import Any

from pyrula.workflows import WorkflowContext, workflow


@workflow(name="only_in_other_app")
async def only_in_other_app(ctx: WorkflowContext, order: dict[str, Any]) -> str:
    return await ctx.step("ship", lambda: f"shipped {order['order']}")
