"""The stand-in conversation the Pydantic AI tests replay: an agent looks a ticket up, notifies
its owner (a side effect), then answers with a structured verdict, on OpenAI or Anthropic.

The provider answers by turn (how many tool results the request carries).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from pyrula.agents.integrations import PyrulaDurability
from tests.agents.integrations.support import arrive, effect

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-haiku-4-5"
# What the model asks for, turn by turn: (tool name, arguments).
TURNS = [
    ("lookup", {"ticket": "T-42"}),
    ("notify", {"ticket": "T-42"}),
    ("final_result", {"severity": "high", "owner": "ops"}),
]


class Verdict(BaseModel):
    severity: str
    owner: str


def _turn(body: dict[str, Any]) -> int:
    done = 0
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            done += 1
        content = message.get("content")
        if isinstance(content, list):
            done += sum(1 for block in content if block.get("type") == "tool_result")
    return min(done, len(TURNS) - 1)


def openai_turn(body: dict[str, Any]) -> dict[str, Any]:
    name, args = TURNS[_turn(body)]
    call = {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": OPENAI_MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }


def anthropic_turn(body: dict[str, Any]) -> dict[str, Any]:
    name, args = TURNS[_turn(body)]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": ANTHROPIC_MODEL,
        "content": [{"type": "tool_use", "id": f"toolu_{name}", "name": name, "input": args}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 2},
    }


def anthropic_stream(message: dict[str, Any]) -> list[bytes]:
    """`message` as Anthropic's named SSE events (a tool call's input as one JSON delta)."""

    def named(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    block = message["content"][0]
    frames = [
        named("message_start", {"message": {**message, "content": [], "stop_reason": None}}),
        named("content_block_start", {"index": 0, "content_block": {**block, "input": {}}}),
        named(
            "content_block_delta",
            {
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
            },
        ),
        named("content_block_stop", {"index": 0}),
        named(
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        named("message_stop", {}),
    ]
    return frames


def reply_for(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    return openai_turn(body) if provider == "openai" else anthropic_turn(body)


def frames_for(provider: str, body: dict[str, Any]) -> tuple[dict[str, str], list[bytes]]:
    """The stand-in's reply to `body`: headers and frames, streamed when it asks for a stream."""
    reply = reply_for(provider, body)
    if provider == "anthropic" and body.get("stream"):
        return {"content-type": "text/event-stream"}, anthropic_stream(reply)
    return {"content-type": "application/json"}, [json.dumps(reply).encode()]


def model_for(
    provider: str, base_url: str, *, hook_folder: str | None = None, http_client: Any = None
) -> Any:
    """A Pydantic AI model of `provider` sending to `base_url`; `hook_folder` makes each request
    an `arrive` boundary."""
    if http_client is None:
        hooks: dict[str, Any] = {}
        if hook_folder is not None:

            async def before(request: Any) -> None:
                arrive(hook_folder)

            hooks = {"request": [before]}
        http_client = httpx2.AsyncClient(event_hooks=hooks)
    if provider == "openai":
        client = openai.AsyncOpenAI(
            api_key="sk-test", base_url=f"{base_url}/v1", http_client=http_client, max_retries=0
        )
        return OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
    sdk = anthropic.AsyncAnthropic(
        api_key="sk-test", base_url=base_url, http_client=http_client, max_retries=0
    )
    return AnthropicModel(ANTHROPIC_MODEL, provider=AnthropicProvider(anthropic_client=sdk))


def triage_agent(model: Any, folder: str, **durability: Any) -> Agent[None, Verdict]:
    """The agent under test: two function tools (one with an effect) and a structured output."""
    agent = Agent(
        model, name="triage", output_type=Verdict, capabilities=[PyrulaDurability(**durability)]
    )

    @agent.tool_plain
    def lookup(ticket: str) -> str:
        arrive(folder)
        return f"{ticket}: the printer is on fire"

    @agent.tool_plain
    def notify(ticket: str) -> str:
        arrive(folder)
        effect(folder, f"notified {ticket}")
        return "owner notified"

    return agent
