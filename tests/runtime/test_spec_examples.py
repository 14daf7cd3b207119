"""A raw SDK client (not the drop-in) given Pyrula's transport journals inside an agent too."""

from __future__ import annotations

import asyncio

from pyrula.agents import AgentContext, agent
from pyrula.agents.testing.runner import AgentRunner
from tests.fakes.openai_api import openai_client, response_body
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply


def test_a_raw_sdk_client_on_the_transport_is_journaled_and_metered():
    provider = Upstream(OPENAI_LIB, lambda request: json_reply(response_body("Pong.")))
    provider_calls = provider.calls

    @agent(name="raw_responses_ping")
    async def ping(ctx: AgentContext) -> str:
        client = openai_client(provider, is_async=True, api_key="unused")
        response = await client.responses.create(model="gpt-6-luna", input="Ping?")
        return response.output_text

    events = asyncio.run(AgentRunner(ping).run())
    assert events[-1].payload["result"] == "Pong." and len(provider_calls) == 1
    done = [e for e in events if e.type == "llm:done"]
    assert done[0].payload["input_tokens"] == 9 and done[0].payload["output_tokens"] == 2
