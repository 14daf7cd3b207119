"""The workflow the crash test's worker processes import: a LangChain `ChatOpenAI` wrapped by
`durable_chat_model` asks for a tool, the tool runs as a step (its side effect logged), the run
waits at a gate file (where the test kills its worker), asks a human, and summarises."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
from langchain_openai import ChatOpenAI

from pyrula.agents.integrations import durable_chat_model
from pyrula.runtime import WorkflowContext, workflow


def append(path: str, line: str) -> None:
    with open(path, "a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def lookup(city: str) -> str:
    """Look the weather in a city up."""
    return city


@workflow(name="lg_research")
async def research(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    model = durable_chat_model(
        ChatOpenAI(
            model="gpt-4o-mini",
            api_key="sk-unused",  # type: ignore[arg-type]
            base_url=f"{request['provider']}/v1",
            max_retries=0,
            http_async_client=httpx.AsyncClient(),
        )
    )
    rounds = request["rounds"]
    asked = await model.bind_tools([lookup]).ainvoke(f"Weather in {request['topic']}, {rounds}?")
    city = asked.tool_calls[0]["args"]["city"]

    def looked_up() -> str:
        append(request["log"], f"looked up {city} {rounds}")  # the tool's side effect
        return f"21C in {city}"

    found = await ctx.step("lookup", looked_up)
    append(request["log"], f"ready {rounds}")  # every attempt: where the test kills the worker
    verdict = "auto"
    if rounds == 0:
        while not os.path.exists(request["gate"]):
            await asyncio.sleep(0.01)
        verdict = await ctx.interrupt(f"publish {found}?")
    final = await model.ainvoke(f"Summarise {found} ({verdict}), {rounds}")
    return str(final.content)
