"""The spec's two runnable examples, unchanged but for the stack the installed SDK uses."""

from __future__ import annotations

import asyncio
import json

import openai

from pyrula.agents import AgentContext, agent
from pyrula.agents.testing.runner import AgentRunner
from tests.providers import OPENAI_LIB

httpx = OPENAI_LIB  # the examples say `httpx`; openai 3.x runs on httpx2, whose API is the same


def test_responses_ping():
    provider_calls = []

    def provider(request):
        provider_calls.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "id": "resp_1",
                "object": "response",
                "created_at": 0,
                "model": "gpt-6-luna",
                "status": "completed",
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "output": [
                    {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "Pong.", "annotations": []}],
                    }
                ],
                "usage": {
                    "input_tokens": 9,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 2,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 11,
                },
            },
        )

    from pyrula.transport import AsyncHttpx2Transport, AsyncHttpxTransport

    journal = AsyncHttpx2Transport if httpx.__name__ == "httpx2" else AsyncHttpxTransport

    @agent(name="responses_ping")
    async def ping(ctx: AgentContext) -> str:
        client = openai.AsyncOpenAI(
            api_key="unused",
            base_url="http://openai.test/v1",
            http_client=httpx.AsyncClient(transport=journal(httpx.MockTransport(provider))),
        )
        response = await client.responses.create(model="gpt-6-luna", input="Ping?")
        return response.output_text

    events = asyncio.run(AgentRunner(ping).run())
    assert events[-1].payload["result"] == "Pong." and len(provider_calls) == 1
    done = [e for e in events if e.type == "llm:done"]
    assert done[0].payload["input_tokens"] == 9 and done[0].payload["output_tokens"] == 2
