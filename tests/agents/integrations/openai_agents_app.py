"""The durable agent the worker processes of the OpenAI Agents SDK tests import."""

from __future__ import annotations

from pyrula.agents import AgentContext, agent
from tests.agents.integrations.openai_agents_support import journaled_client, run_triage


@agent(name="oa_triage")
async def oa_triage(ctx: AgentContext, url: str, folder: str, streamed: bool) -> str:
    journaled_client(url, folder)
    return await run_triage(ctx, folder, streamed=streamed)
