"""The stand-in Responses API the OpenAI Agents SDK tests talk to, and the recipe's agents.

A triage agent behind an input guardrail (itself an agent: one model call) hands off to a
specialist that files the ticket with a tool (its effect inside `ctx.step`) and answers. The
stand-in answers by who is asking (the request's `instructions`) and what the input holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agents
import httpx2
from agents import (
    Agent,
    GuardrailFunctionOutput,
    RunConfig,
    Runner,
    ToolExecutionConfig,
    function_tool,
    input_guardrail,
)
from pydantic import BaseModel

from pyrula.agents.compat.openai import AsyncOpenAI
from pyrula.agents.integrations.openai_agents import PyrulaRunHooks, use_journaled_client
from tests.agents.integrations.support import arrive, effect

MODEL = "gpt-4o-mini"


class Harm(BaseModel):
    harmful: bool


TRIAGE = "You triage support tickets."


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{name}",
        "call_id": f"call_{name}",
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }


def output_for(body: dict[str, Any]) -> dict[str, Any]:
    """The output item the stand-in answers `body` with."""
    instructions = body.get("instructions") or ""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    if "guard" in instructions:
        return _message(json.dumps({"harmful": False}))
    if instructions.startswith("You triage"):
        return _call("transfer_to_specialist", {})
    if "call_file_ticket" not in outputs:
        return _call("file_ticket", {"ticket": "T-42"})
    return _message("Filed T-42 with the printer team.")


def response_for(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": MODEL,
        "status": "completed",
        "output": [output_for(body)],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 9,
            "output_tokens": 2,
            "total_tokens": 11,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def frames_for(body: dict[str, Any]) -> tuple[dict[str, str], list[bytes]]:
    """The reply to `body`: a JSON response, or its Responses SSE events when it streams."""
    response = response_for(body)
    if not body.get("stream"):
        return {"content-type": "application/json"}, [json.dumps(response).encode()]

    def event(n: int, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": n, **data}
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    item = response["output"][0]
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    return {"content-type": "text/event-stream"}, [
        event(0, "response.created", response=started),
        event(1, "response.output_item.added", output_index=0, item=item),
        event(2, "response.output_item.done", output_index=0, item=item),
        event(3, "response.completed", response=response),
    ]


class _ToStandIn(httpx2.AsyncBaseTransport):
    """Sends what is addressed to api.openai.com to the stand-in at `url` (the SDK puts its
    random `prompt_cache_key` only in requests to the official host)."""

    def __init__(self, url: str) -> None:
        self._target = httpx2.URL(url)
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: Any) -> Any:
        request.url = request.url.copy_with(
            scheme=self._target.scheme, host=self._target.host, port=self._target.port
        )
        return await self._inner.handle_async_request(request)


def journaled_client(url: str, folder: str | None = None, http: Any = None) -> AsyncOpenAI:
    """The recipe's client: the journaled AsyncOpenAI, addressed to the official host (served by
    the stand-in at `url`, or by `http`), set as the SDK's default."""
    if http is None:
        hooks: dict[str, Any] = {}
        if folder is not None:

            async def before(request: Any) -> None:
                arrive(folder)

            hooks = {"request": [before]}
        http = httpx2.AsyncClient(event_hooks=hooks, transport=_ToStandIn(url))
    client = AsyncOpenAI(
        api_key="sk-test", base_url="https://api.openai.com/v1", http_client=http, max_retries=0
    )
    agents.set_tracing_disabled(True)  # trace export would leave the journal (and the machine)
    use_journaled_client(client)
    return client


async def run_triage(ctx: Any, folder: str, *, streamed: bool, instructions: str = TRIAGE) -> str:
    """The recipe: a tool in a step, a handoff and an input guardrail, run or run_streamed."""

    def file(ticket: str) -> str:
        effect(folder, f"filed {ticket}")
        return f"{ticket} filed"

    @function_tool(failure_error_function=None)
    async def file_ticket(ticket: str) -> str:
        """File the ticket with the owning team."""
        arrive(folder)
        result: str = await ctx.step("file_ticket", file, ticket)
        return result

    guard_agent = Agent(
        name="guard", instructions="You guard the desk.", model=MODEL, output_type=Harm
    )

    @input_guardrail(run_in_parallel=False)
    async def harmless(context: Any, agent: Any, text: Any) -> GuardrailFunctionOutput:
        verdict = await Runner.run(guard_agent, text, context=context.context)
        return GuardrailFunctionOutput(
            output_info=verdict.final_output, tripwire_triggered=verdict.final_output.harmful
        )

    specialist = Agent(
        name="specialist", instructions="You file tickets.", model=MODEL, tools=[file_ticket]
    )
    triage = Agent(
        name="triage",
        instructions=instructions,
        model=MODEL,
        handoffs=[specialist],
        input_guardrails=[harmless],
    )
    config = RunConfig(tool_execution=ToolExecutionConfig(max_function_tool_concurrency=1))
    if streamed:
        running = Runner.run_streamed(
            triage, "Printer on fire: T-42", run_config=config, hooks=PyrulaRunHooks()
        )
        async for _ in running.stream_events():
            pass
        return str(running.final_output)
    result = await Runner.run(
        triage, "Printer on fire: T-42", run_config=config, hooks=PyrulaRunHooks()
    )
    return str(result.final_output)


def effects(folder: Path) -> list[str]:
    path = folder / "effects"
    return path.read_text().splitlines() if path.exists() else []
