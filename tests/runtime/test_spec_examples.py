"""A raw SDK client (not the drop-in) given Pyrula's transport journals inside an agent too."""

from __future__ import annotations

import asyncio
import json

import openai

from pyrula.agents import AgentContext, agent
from pyrula.agents.testing.runner import AgentRunner
from tests.fakes.openai_api import response_body
from tests.fakes.provider import OPENAI_LIB, journal_transport


def test_a_raw_sdk_client_on_the_transport_is_journaled_and_metered():
    provider_calls = []

    def provider(request):
        provider_calls.append(json.loads(request.content))
        return OPENAI_LIB.Response(200, json=response_body("Pong."))

    @agent(name="raw_responses_ping")
    async def ping(ctx: AgentContext) -> str:
        transport = journal_transport(OPENAI_LIB, OPENAI_LIB.MockTransport(provider), is_async=True)
        client = openai.AsyncOpenAI(
            api_key="unused",
            base_url="http://openai.test/v1",
            http_client=OPENAI_LIB.AsyncClient(transport=transport),
        )
        response = await client.responses.create(model="gpt-6-luna", input="Ping?")
        return response.output_text

    events = asyncio.run(AgentRunner(ping).run())
    assert events[-1].payload["result"] == "Pong." and len(provider_calls) == 1
    done = [e for e in events if e.type == "llm:done"]
    assert done[0].payload["input_tokens"] == 9 and done[0].payload["output_tokens"] == 2
