"""`AgentRunner`, as the README uses it: imported from `pyrula.agents.testing`, sync or async."""

from __future__ import annotations

import asyncio

from pyrula.agents import AgentContext, agent
from pyrula.agents.testing import AgentRunner


@agent(name="runner_echo")
async def runner_echo(ctx: AgentContext, ticket: str) -> str:
    filed = await ctx.step("file", lambda: f"filed {ticket}")
    return filed.upper()


def test_run_sync_returns_the_events_of_a_finished_run():
    events = AgentRunner(runner_echo).run_sync("T-42")
    assert events[-1].type == "run:done"
    assert events[-1].payload["result"] == "FILED T-42"
    assert [e.type for e in events].count("step:done") == 1


def test_run_is_awaitable_inside_a_running_loop():
    async def main() -> str:
        events = await AgentRunner(runner_echo).run("T-7")
        return str(events[-1].payload["result"])

    assert asyncio.run(main()) == "FILED T-7"
