"""`AgentRunner(..., live_budget_usd=...)`: a run's model calls through the real OpenAI SDK (the
drop-in) held to a live budget: the call past it is refused before it is sent and ends the run
on `budget_exceeded`, a body may catch it and fall back to a cheaper call, and a run replayed
from a cassette spends nothing live."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pyrula import cassette
from pyrula.agents import AgentContext, agent
from pyrula.agents.compat.openai import AsyncOpenAI
from pyrula.agents.testing import AgentRunner
from pyrula.errors import LiveBudgetExceeded
from pyrula.runtime import RunStore, prices
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, json_reply

MODEL = "runner-budget-test-model"
prices.add(MODEL, input=0.0, output=1000.0)  # max_tokens=100: $0.10 at most; a reply $0.002


def _stub() -> Upstream:
    def reply(request: Any) -> Any:
        question = json.loads(request.content)["messages"][-1]["content"]
        return json_reply(chat_completion(f"answer to {question}", model=MODEL))

    return Upstream(OPENAI_LIB, reply)


def _client(stub: Upstream) -> AsyncOpenAI:
    return openai_client(stub, cls=AsyncOpenAI, journaled=False, api_key="sk-x", max_retries=0)


async def _ask(client: AsyncOpenAI, question: str, max_tokens: int) -> str:
    out = await client.chat.completions.create(
        model=MODEL, messages=ask(question), max_tokens=max_tokens
    )
    return str(out.choices[0].message.content)


def test_a_call_past_the_runner_s_budget_is_refused_and_ends_the_run():
    stub = _stub()

    @agent(name="runner_budget.over")
    async def over(ctx: AgentContext) -> str:
        client = _client(stub)
        first = await _ask(client, "one", 100)  # $0.10 held, $0.002 spent
        return first + await _ask(client, "two", 200)  # up to $0.20 more: past $0.15

    runner = AgentRunner(over, live_budget_usd=0.15)
    events = runner.run_sync()

    assert len(stub.calls) == 1  # the second call never reached the provider
    error = events[-1].payload["error"]
    assert error["type"] == "LiveBudgetExceeded" and error["code"] == "live_budget_exceeded"
    assert "AgentRunner('runner_budget.over')" in error["message"]
    assert "live_budget_usd=" in error["message"]
    assert RunStore(runner.store).get(runner.run_id).status == "budget_exceeded"
    live = runner.live_spend()
    assert live.calls == 1 and live.cost_usd == pytest.approx(0.002)


def test_a_body_that_catches_the_refusal_falls_back_to_a_cheaper_call():
    stub = _stub()

    @agent(name="runner_budget.fallback")
    async def fallback(ctx: AgentContext) -> str:
        client = _client(stub)
        try:
            return await _ask(client, "long", 1_000)  # up to $1: past the budget
        except LiveBudgetExceeded:
            return await _ask(client, "short", 10)

    runner = AgentRunner(fallback, live_budget_usd=0.05)
    events = runner.run_sync()

    assert events[-1].payload["result"] == "answer to short"
    assert [c["messages"][-1]["content"] for c in stub.calls] == ["short"]
    assert runner.live_spend().calls == 1


def test_a_run_replayed_from_its_cassette_spends_nothing_live(tmp_path):
    stub = _stub()

    @agent(name="runner_budget.replayed")
    async def replayed(ctx: AgentContext) -> str:
        return await _ask(_client(stub), "one", 100)

    store = str(tmp_path / "cassettes")
    with cassette("runner", "once", store=store):
        recording = AgentRunner(replayed, live_budget_usd=1.0)
        assert recording.run_sync()[-1].payload["result"] == "answer to one"
    with cassette("runner", "none", store=store):
        replaying = AgentRunner(replayed, live_budget_usd=0.0)
        assert replaying.run_sync()[-1].payload["result"] == "answer to one"

    assert len(stub.calls) == 1
    assert recording.live_spend().calls == 1
    assert replaying.live_spend().calls == 0 and replaying.live_spend().cost_usd == 0.0
    assert replaying.spend().calls == 1  # the run still journals the call it replayed
