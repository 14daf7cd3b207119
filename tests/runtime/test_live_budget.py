"""A case's live budget, through the real OpenAI and Anthropic SDKs against stand-in providers:
a call past it is refused before it is sent, a replay spends nothing, concurrent calls cannot
overshoot it together, and what was held for a call that got no reply is let go."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from pyrula import cassette
from pyrula.errors import BudgetExceeded, LiveBudgetExceeded
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import namespace_prefix
from pyrula.runtime import LiveBudget, prices
from pyrula.runtime.failures import describe_error, rebuild_error
from pyrula.transport import journal_botocore
from tests.fakes import anthropic_api, bedrock_api
from tests.fakes.openai_api import BASE_URL, chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, TEST_KEY, Upstream, ask, json_reply, sse_reply

MODEL = "live-budget-test-model"
# $1000 a million output tokens, input free: a call with max_tokens=100 may cost $0.10 at most,
# and its reply (2 output tokens) costs $0.002.
prices.add(MODEL, input=0.0, output=1000.0)
WORST = 0.1
ACTUAL = 0.002


def _upstream() -> Upstream:
    """A stand-in answering in the name of the model asked."""

    def reply(request: Any) -> Any:
        return json_reply(chat_completion("hi", model=json.loads(request.content)["model"]))

    return Upstream(OPENAI_LIB, reply)


def _ask(client: Any, question: str, max_tokens: int = 100) -> Any:
    return client.chat.completions.create(
        model=MODEL, messages=ask(question), max_tokens=max_tokens
    )


def _recorded(store: str, name: str) -> int:
    from pyrula.journal.store import open_store

    opened = open_store(store)
    try:
        return sum(1 for _ in Exchanges(opened).scan(namespace_prefix(name)))
    finally:
        opened.close()


def test_a_call_past_the_budget_is_refused_before_it_is_sent(tmp_path):
    stub = _upstream()
    client = openai_client(stub)
    store = str(tmp_path / "store")
    with cassette("case", "once", store=store), LiveBudget(0.15, name="case one") as live:
        _ask(client, "first")  # $0.10 held, then $0.002 spent
        with pytest.raises(LiveBudgetExceeded) as refused:
            _ask(client, "second", max_tokens=200)  # up to $0.20 more: past $0.15

    assert len(stub.calls) == 1  # the refused call never reached the provider
    assert refused.value.code == "live_budget_exceeded"
    assert refused.value.limit == "live_budget_usd"
    assert isinstance(refused.value, BudgetExceeded)  # caught where a run's cap is
    message = str(refused.value)
    assert "case one" in message and "$0.1500" in message and "$0.2000 more" in message
    assert live.spent.calls == 1 and live.spent.cost_usd == pytest.approx(ACTUAL)
    assert _recorded(store, "case") == 1  # nothing was recorded for it


def test_a_replay_spends_nothing_and_is_never_refused(tmp_path):
    stub = _upstream()
    client = openai_client(stub)
    store = str(tmp_path / "store")
    with cassette("case", "once", store=store), LiveBudget(1.0) as recording:
        _ask(client, "first")
    with cassette("case", "none", store=store), LiveBudget(0.0) as replaying:
        assert _ask(client, "first").choices[0].message.content == "hi"

    assert len(stub.calls) == 1
    assert recording.spent.calls == 1 and recording.spent.cost_usd == pytest.approx(ACTUAL)
    assert replaying.spent.calls == 0 and replaying.spent.cost_usd == 0.0


def test_the_reply_s_priced_usage_replaces_what_was_held():
    # $0.25 holds two worst cases at once; each settles at $0.002, so a third and a fourth fit.
    stub = _upstream()
    client = openai_client(stub)
    with cassette("case", "all", store=None), LiveBudget(0.25) as live:
        for n in range(4):
            _ask(client, f"q{n}")

    assert len(stub.calls) == 4
    assert live.spent.calls == 4 and live.spent.cost_usd == pytest.approx(4 * ACTUAL)
    assert live.spent.input_tokens == 4 * 9 and live.spent.output_tokens == 4 * 2


class _Held:
    """A stand-in that holds every reply until `release`: the calls let through are all in
    flight together, each with its worst case reserved."""

    def __init__(self) -> None:
        self.arrived = 0
        self.refused = 0
        self.changed = threading.Condition()
        self.release = threading.Event()

    def note(self, *, refused: bool) -> None:
        with self.changed:
            if refused:
                self.refused += 1
            else:
                self.arrived += 1
            self.changed.notify_all()

    def wait_for(self, arrived: int, refused: int) -> bool:
        with self.changed:
            return self.changed.wait_for(
                lambda: self.arrived >= arrived and self.refused >= refused, timeout=30
            )


def test_concurrent_threads_cannot_overshoot_the_budget():
    held = _Held()

    def reply(request: Any) -> Any:
        held.note(refused=False)
        assert held.release.wait(30)
        return json_reply(chat_completion("hi", model=MODEL))

    stub = Upstream(OPENAI_LIB, reply)
    client = openai_client(stub)

    def one(n: int) -> str:
        try:
            _ask(client, f"q{n}")
        except LiveBudgetExceeded:
            held.note(refused=True)
            return "refused"
        return "sent"

    # $0.35 holds three worst cases of $0.10: of six calls at once, three go, three are refused.
    with (
        cassette("case", "all", store=None),
        LiveBudget(0.35) as live,
        ThreadPoolExecutor(6) as pool,  # threads without the caller's context
    ):
        futures = [pool.submit(one, n) for n in range(6)]
        assert held.wait_for(arrived=3, refused=3)
        held.release.set()
        outcomes = sorted(f.result() for f in futures)

    assert outcomes == ["refused"] * 3 + ["sent"] * 3
    assert len(stub.calls) == 3 and held.arrived == 3
    assert live.spent.calls == 3 and live.spent.cost_usd == pytest.approx(3 * ACTUAL)


def test_concurrent_tasks_cannot_overshoot_the_budget():
    async def main() -> tuple[list[str], int, LiveBudget]:
        arrived: list[int] = []
        refused: list[int] = []
        release = asyncio.Event()

        def check() -> None:
            if len(arrived) == 3 and len(refused) == 3:
                release.set()

        async def handler(request: Any) -> Any:
            arrived.append(1)
            check()
            await release.wait()
            body = json.dumps(chat_completion("hi", model=MODEL)).encode()
            headers = {"content-type": "application/json"}
            return OPENAI_LIB.Response(200, headers=headers, content=body)

        from pyrula.transport import AsyncHttpx2Transport, AsyncHttpxTransport

        journal = AsyncHttpx2Transport if OPENAI_LIB is not httpx else AsyncHttpxTransport
        http = OPENAI_LIB.AsyncClient(transport=journal(OPENAI_LIB.MockTransport(handler)))
        client = openai.AsyncOpenAI(api_key=TEST_KEY, base_url=BASE_URL, http_client=http)

        async def one(n: int) -> str:
            try:
                await client.chat.completions.create(
                    model=MODEL, messages=ask(f"q{n}"), max_tokens=100
                )
            except LiveBudgetExceeded:
                refused.append(1)
                check()
                return "refused"
            return "sent"

        with cassette("case", "all", store=None):
            async with LiveBudget(0.35) as live:
                outcomes = await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(6))), 30)
        return sorted(outcomes), len(arrived), live

    outcomes, arrived, live = asyncio.run(main())
    assert outcomes == ["refused"] * 3 + ["sent"] * 3
    assert arrived == 3
    assert live.spent.calls == 3 and live.spent.cost_usd == pytest.approx(3 * ACTUAL)


def test_a_call_that_got_no_reply_lets_its_reservation_go():
    # The first attempt's connection drops; the SDK's retry must fit the same $0.15 budget,
    # which it could not if the lost attempt's $0.10 were still held.
    attempts: list[int] = []

    def reply(request: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise OPENAI_LIB.ReadError("connection reset", request=request)
        return json_reply(chat_completion("hi", model=MODEL))

    stub = Upstream(OPENAI_LIB, reply)
    client = openai_client(stub, max_retries=1)
    with cassette("case", "all", store=None), LiveBudget(0.15) as live:
        assert _ask(client, "q").choices[0].message.content == "hi"

    assert len(attempts) == 2
    assert live.spent.calls == 1 and live.spent.cost_usd == pytest.approx(ACTUAL)


def test_nested_budgets_each_hold_the_call_and_each_count_it():
    stub = _upstream()
    client = openai_client(stub)
    with cassette("case", "all", store=None), LiveBudget(0.15, name="the test") as outer:
        with LiveBudget(None, name="the runner") as inner:
            _ask(client, "first")
            with pytest.raises(LiveBudgetExceeded, match="the test"):
                _ask(client, "second", max_tokens=200)  # the runner has no cap; the test's
        assert inner.spent.calls == 1
    assert outer.spent.calls == 1 and len(stub.calls) == 1


def test_an_unpriced_model_cannot_be_held_to_a_budget_but_is_metered_without_one():
    stub = _upstream()
    client = openai_client(stub)
    unpriced = {"model": "no-such-priced-model", "messages": ask("q"), "max_tokens": 10}
    with cassette("case", "all", store=None):
        with LiveBudget(1.0), pytest.raises(LiveBudgetExceeded) as refused:
            client.chat.completions.create(**unpriced)
        with LiveBudget() as metered:
            client.chat.completions.create(**unpriced)

    assert refused.value.code == "unpriced_model" and "prices.add" in str(refused.value)
    assert len(stub.calls) == 1
    assert metered.spent.calls == 1 and metered.spent.unpriced == 1
    assert metered.spent.cost_usd == 0.0


def test_an_anthropic_stream_read_partway_counts_at_what_was_held():
    prices.add("claude-live-budget-test", input=0.0, output=1000.0)
    stub = Upstream(anthropic_api.ANTHROPIC_LIB, lambda r: sse_reply(_claude_stream()))
    client = anthropic_api.anthropic_client(stub)
    with (
        cassette("case", "all", store=None),
        LiveBudget(1.0) as live,
        client.messages.stream(
            model="claude-live-budget-test", max_tokens=50, messages=ask("q")
        ) as stream,
    ):
        next(iter(stream.text_stream))  # one delta, then the reader stops

    assert len(stub.calls) == 1
    assert live.spent.calls == 1 and live.spent.estimated == 1
    assert live.spent.cost_usd == pytest.approx(50 * 1000 / 1e6)  # its output cap, at its price


def _claude_stream() -> list[bytes]:
    frames = anthropic_api.anthropic_sse("one two three four")
    return [f.replace(b'"claude-test"', b'"claude-live-budget-test"') for f in frames]


def test_a_budget_is_a_cost_of_zero_or_more():
    with pytest.raises(ValueError, match="0 or more"):
        LiveBudget(-1.0)


def test_a_boto3_converse_past_the_budget_is_refused_before_it_is_sent():
    # Claude Haiku 4.5 on Bedrock: $5 a million output tokens, so maxTokens=1000 may cost
    # $0.005; the stand-in's reply (11 in, 4 out) costs $0.000031.
    messages = [{"role": "user", "content": [{"text": "Ping?"}]}]
    with bedrock_api.BedrockStub() as stub:
        client = journal_botocore(bedrock_api.client(stub))
        with cassette("case", "all", store=None), LiveBudget(0.006) as live:
            client.converse(
                modelId=bedrock_api.MODEL_ID, messages=messages, inferenceConfig={"maxTokens": 1000}
            )
            with pytest.raises(LiveBudgetExceeded):
                client.converse(
                    modelId=bedrock_api.MODEL_ID,
                    messages=messages,
                    inferenceConfig={"maxTokens": 1200},  # up to $0.006 more
                )
        assert len(stub.seen) == 1

    assert live.spent.calls == 1
    assert live.spent.cost_usd == pytest.approx((11 * 1.0 + 4 * 5.0) / 1e6)


def test_a_journaled_refusal_replays_as_itself():
    refusal = LiveBudgetExceeded("test x: its live budget of $0.0100 would be exceeded")
    for capture in ("io", "metadata"):
        described = json.loads(json.dumps(describe_error(refusal, capture=capture)))
        rebuilt = rebuild_error(described)
        assert type(rebuilt) is LiveBudgetExceeded and rebuilt.code == "live_budget_exceeded"
    assert str(rebuild_error(describe_error(refusal))) == str(refusal)


def test_a_budget_of_zero_sends_nothing_live_even_to_a_deployment_not_priced_yet():
    # An Azure deployment's first call names no model until its reply does: a run's cost cap
    # lets it through unpriced; a live budget of $0 means replay only, so it is refused.
    stub = _upstream()
    http = stub.http_client(journal={})
    client = openai.AzureOpenAI(
        api_key=TEST_KEY,
        azure_endpoint="http://azure.test",
        api_version="2024-10-21",
        http_client=http,
        max_retries=0,
    )
    with (
        cassette("case", "all", store=None),
        LiveBudget(0.0, name="replay only") as live,
        pytest.raises(LiveBudgetExceeded, match=r"replay only: its live budget is \$0"),
    ):
        client.chat.completions.create(model="my-deployment", messages=ask("q"))
    assert stub.calls == [] and live.spent.calls == 0
