"""The tools the MCP tests serve. The server (`pyrula mcp serve --import
tests.agents.mcp.tools_app:tools`) and the workers import this module.

Each tool appends to its own log (`MCP_TOOL_LOG`): the count of side effects. `charge_card`
can hold mid-tool, between `start` and `effect`, until its order's gate file exists (orders
`hold*` and `seed*`), and after `effect`, before it returns, until the gate `ORDER.after`
exists (orders `seed*`): where the tests kill."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel

from pyrula.runtime import ToolContext, WorkflowContext, tool


def _log(line: str) -> None:
    with open(os.environ["MCP_TOOL_LOG"], "a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def _hold(name: str) -> None:
    gate = os.environ.get("MCP_TOOL_GATE")
    if gate:
        while not Path(f"{gate}.{name}").exists():
            time.sleep(0.01)


class Address(BaseModel):
    street: str
    city: str


@tool
def charge_card(order_id: str, cents: int) -> dict[str, object]:
    """Charge an order's card."""
    _log(f"start {order_id} {cents}")
    if order_id.startswith(("hold", "seed")):
        _hold(order_id)
    _log(f"effect {order_id} {cents}")
    if order_id.startswith("seed"):
        _hold(f"{order_id}.after")
    return {"charged": order_id, "cents": cents}


@tool(read_only=True)
async def lookup(ctx: ToolContext, order_id: str) -> dict[str, object]:
    """Look an order up."""
    return {"order": order_id, "idempotency_key": ctx.idempotency_key, "run": ctx.run_id}


@tool
async def ship(ctx: WorkflowContext, order_id: str, to: Address) -> str:
    """Ship an order."""
    _log(f"effect ship {order_id}")
    return f"{type(ctx).__name__} shipped {order_id} to {to.city}"


@tool(requires_approval=lambda order_id, cents: cents > 10_000)
def refund(order_id: str, cents: int) -> str:
    """Refund an order (large refunds need a reviewer)."""
    _log(f"effect refund {order_id} {cents}")
    return f"refunded {cents}"


@tool
def explode(message: str) -> str:
    """Fail with `message`."""
    raise ValueError(message)


@tool
async def nested(ctx: ToolContext, what: str) -> str:
    """Try a durable orchestration call inside the tool body."""
    if what == "step":
        await ctx.step("inner", lambda: 1)
    elif what == "interrupt":
        await ctx.interrupt("ok?")
    elif what == "sleep":
        await ctx.sleep(5)
    elif what == "signal":
        await ctx.wait_signal("go")
    elif what == "child":
        await ctx.run_child("mcp.tool:lookup", {"order_id": "x"})
    return "unreachable"


tools = [charge_card, lookup, ship, refund, explode, nested]
