"""`rate_limit=`: a native client's live turns wait for an `LLMRate` slot in its provider's
default queue, the one that provider's drop-in uses; a replayed turn takes none."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from pyrula.agents import AnthropicLLM, BedrockLLM, GeminiLLM, OpenAILLM, agent
from pyrula.agents.llm import Message
from pyrula.agents.testing import AgentRunner
from pyrula.runtime import LLMRate, RunStore, Worker, fork
from pyrula.runtime.calls import BEDROCK, GEMINI
from tests.fakes.agent_api import model_for, text, upstream
from tests.fakes.clock import SkippingClock

_keys = itertools.count()


def test_each_client_queues_under_its_providers_default_key():
    assert GeminiLLM.rate_key == GEMINI and BedrockLLM.rate_key == BEDROCK
    assert (OpenAILLM.rate_key, AnthropicLLM.rate_key) == ("openai", "anthropic")


def test_a_native_client_and_a_genai_drop_in_share_one_queue():
    pytest.importorskip("google.genai")
    from pyrula.agents.compat import genai
    from tests.fakes import gemini_api

    clock = SkippingClock()
    rate = LLMRate(requests_per_minute=1, key=f"native-rate-{next(_keys)}", clock=clock)
    stand_in = upstream("gemini", [text("one")])
    native = model_for("gemini", stand_in=stand_in, rate_limit=rate)
    stub = gemini_api.upstream()
    drop_in = genai.Client(api_key="k", http_options=gemini_api.http_options(stub), rate_limit=rate)

    @agent(name=f"native-rate-{next(_keys)}")
    async def both(ctx) -> str:
        first = await native.complete([Message.user("first")])
        await drop_in.aio.models.generate_content(model=gemini_api.MODEL, contents="second")
        return first.text

    runner = AgentRunner(both)
    events = runner.run_sync()
    assert events[-1].payload["result"] == "one"
    assert len(clock.waits) == 1 and clock.waits[0] == pytest.approx(60, rel=0.05)
    copy = fork(runner.run_id, events[-1].seq, store=runner.store)
    asyncio.run(Worker(runner.store, poll_seconds=0.01).run(until_idle=True))
    assert RunStore(runner.store).get(copy.id).result == "one"
    assert len(clock.waits) == 1  # the replayed turns took no slot
    assert len(stand_in.calls) == 1
