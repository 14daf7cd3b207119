"""A workflow only some workers import (`pyrula worker --import tests.runtime.other_worker_app`)."""

from __future__ import annotations

from typing import Any

from pyrula.workflows import WorkflowContext, workflow


@workflow(name="only_in_other_app")
async def only_in_other_app(ctx: WorkflowContext, order: dict[str, Any]) -> str:
    return await ctx.step("ship", lambda: f"shipped {order['order']}")


@workflow(name="awaits_poke")
async def awaits_poke(ctx: WorkflowContext) -> Any:
    """Parks until another run sends it the signal `poke`, and returns what came with it."""
    return await ctx.wait_signal("poke")
