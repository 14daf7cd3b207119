"""The durable agent the worker processes of the Pydantic AI tests import."""

from __future__ import annotations

from pyrula.agents import AgentContext, AgentLimits, agent
from tests.agents.integrations.pydantic_ai_support import model_for, triage_agent


@agent(name="pai_triage", limits=AgentLimits(max_llm_calls=10))
async def pai_triage(ctx: AgentContext, provider: str, url: str, folder: str) -> dict[str, str]:
    model = model_for(provider, url, hook_folder=folder)
    result = await triage_agent(model, folder).run("Triage ticket T-42")
    return result.output.model_dump()
