"""Agents: spend caps held before each call, metering in steps and tools, threads, tools."""

from __future__ import annotations

import asyncio

import pytest

from pyrula.agents import (
    AgentContext,
    AgentLimits,
    BudgetExceeded,
    ToolContext,
    ToolRefused,
    UnjournaledSurface,
    agent,
    tool,
)
from pyrula.journal.exchanges import Exchanges
from pyrula.runtime import answer
from tests.fakes.provider import OPENAI_LIB, Upstream
from tests.runtime.support import (
    ask,
    async_openai,
    chat_upstream,
    drive,
    new_store,
    run_to_rest,
    sync_openai,
)

UPSTREAM = chat_upstream()


@pytest.fixture(autouse=True)
def _clear():
    UPSTREAM.calls.clear()


@agent(name="two_calls", limits=AgentLimits(max_llm_calls=1))
async def two_calls(ctx: AgentContext) -> str:
    client = async_openai(UPSTREAM)
    await ask(client, "one")
    return await ask(client, "two")


def test_a_call_over_max_llm_calls_is_refused_before_it_is_sent():
    handle = run_to_rest(two_calls)
    record = handle.record
    assert record.status == "budget_exceeded"
    assert record.error["limit"] == "max_llm_calls"
    assert [c["messages"][0]["content"] for c in UPSTREAM.calls] == ["one"]


@agent(name="catches_refusal", limits=AgentLimits(max_llm_calls=1))
async def catches_refusal(ctx: AgentContext) -> str:
    client = async_openai(UPSTREAM)
    await ask(client, "one")
    try:
        return await ask(client, "two")
    except BudgetExceeded:
        return "fallback"


def test_code_that_catches_the_refusal_carries_on():
    handle = run_to_rest(catches_refusal)
    assert asyncio.run(handle.result()) == "fallback"


class _SlowUpstream(Upstream):
    """An upstream whose replies take a moment, so two calls are in flight together."""

    def transport(self) -> object:
        async def handler(request: object) -> object:
            await asyncio.sleep(0.05)
            return self.handler(request)

        return OPENAI_LIB.MockTransport(handler)


SLOW = _SlowUpstream(OPENAI_LIB, UPSTREAM.reply)


@agent(name="token_cap", limits=AgentLimits(max_total_tokens=500))
async def token_cap(ctx: AgentContext) -> list[str]:
    client = async_openai(SLOW)
    # Each call may use up to 400 tokens: both cannot fit, even when sent at once.
    results = await asyncio.gather(
        ask(client, "a", max_tokens=400),
        ask(client, "b", max_tokens=400),
        return_exceptions=True,
    )
    return [type(r).__name__ for r in results]


def test_concurrent_calls_reserve_their_worst_case():
    handle = run_to_rest(token_cap)
    assert sorted(asyncio.run(handle.result())) == ["BudgetExceeded", "str"]
    assert len(SLOW.calls) == 1


@agent(name="unpriced", limits=AgentLimits(max_cost_usd=1.0))
async def unpriced(ctx: AgentContext) -> str:
    reply = await async_openai(UPSTREAM).chat.completions.create(
        model="my-private-model", messages=[{"role": "user", "content": "x"}]
    )
    return reply.choices[0].message.content or ""


def test_a_costed_call_with_no_price_is_refused_as_unpriced_model():
    handle = run_to_rest(unpriced)
    assert handle.record.error["code"] == "unpriced_model"
    assert UPSTREAM.calls == []


@agent(name="metered")
async def metered(ctx: AgentContext) -> str:
    client = async_openai(UPSTREAM)
    direct = await ask(client, "direct")
    in_step = await ctx.step("summarise", ask, client, "in a step")
    await ctx.interrupt("keep going?")
    return direct + " / " + in_step


def test_calls_in_steps_are_metered_not_journaled_and_never_charged_twice():
    store = new_store()
    handle = run_to_rest(metered, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    events = handle.events()
    done = [e.payload for e in events if e.type == "llm:done"]
    assert [d["within"] for d in done] == ["run", "step"]
    assert done[1]["step_id"] is not None
    assert all(d["model"] == "gpt-test" and d["total_tokens"] == 11 for d in done)
    assert done[0]["cost_usd"] is None  # the reply named a model the table does not price
    assert len(UPSTREAM.calls) == 2  # the resume replayed both
    run_exchanges = [r for _, r in Exchanges(store).scan(b"r\x00" + handle.id.encode())]
    assert len(run_exchanges) == 1  # only the direct call is a journaled exchange


@agent(name="asks_once")
async def asks_once(ctx: AgentContext) -> str:
    answer_ = await ask(async_openai(UPSTREAM), "indexed?")
    await ctx.interrupt("keep going?")
    return answer_


def test_a_runs_call_writes_no_sent_index_entry_and_its_record_keeps_the_digest():
    # Only a cassette's replays look a request up by its sent digest: a run's call is replayed
    # by its position, so its commit leaves the sent index alone.
    store = new_store()
    UPSTREAM.calls.clear()
    handle = run_to_rest(asks_once, store=store)
    (record,) = [r for _, r in Exchanges(store).scan(b"r\x00" + handle.id.encode())]
    assert len(record.extra["sent"]) == 64  # an export or a text cassette still carries it
    assert list(store.iter_prefix(store.db("sent_index"), b"")) == []
    answer(handle.id, "yes", store=store)
    drive(store)
    assert asyncio.run(handle.result()) == "answer to indexed?"
    assert len(UPSTREAM.calls) == 1  # the resume replayed the call


@agent(name="sync_on_loop")
async def sync_on_loop(ctx: AgentContext) -> str:
    client = sync_openai(UPSTREAM)
    return (
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "blocking"}]
        )
        .choices[0]
        .message.content
        or ""
    )


def test_a_sync_call_on_the_run_loop_is_refused_before_any_request():
    handle = run_to_rest(sync_on_loop)
    assert handle.record.error["type"] in (UnjournaledSurface.__name__, "APIConnectionError")
    assert UPSTREAM.calls == []


@agent(name="threads")
async def threads(ctx: AgentContext) -> list[str]:
    client = sync_openai(UPSTREAM)

    def ask_sync(question: str) -> str:
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": question}]
        )
        return reply.choices[0].message.content or ""

    one = await ctx.to_thread(ask_sync, "thread")
    many = await ctx.map_threads(ask_sync, ["m0", "m1", "m2"])
    await ctx.interrupt("again?")
    return [one, *many]


def test_sync_calls_on_run_threads_journal_in_their_own_scopes():
    store = new_store()
    handle = run_to_rest(threads, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    assert asyncio.run(handle.result()) == [f"answer to {q}" for q in ("thread", "m0", "m1", "m2")]
    assert len(UPSTREAM.calls) == 4
    positions = sorted(e.payload["position"] for e in handle.events() if e.type == "llm:done")
    assert positions[0].startswith("map:") and positions[-1].startswith("thread:")


RAN: list[str] = []


@tool(read_only=False, max_calls=2)
def charge(ctx: ToolContext, amount: int) -> str:
    RAN.append(f"charge {amount} key={ctx.idempotency_key}")
    return f"charged {amount}"


@tool(requires_approval=True)
def delete_everything() -> str:
    RAN.append("deleted")
    return "gone"


@agent(name="uses_tools")
async def uses_tools(ctx: AgentContext) -> list[str]:
    results = [await charge(5, tool_call_id="call_1"), await charge(6)]
    try:
        await charge(7)
    except ToolRefused as refused:
        results.append(str(refused))
    results.append(await delete_everything())
    return results


def test_tools_run_once_wait_for_approval_and_keep_their_limits():
    RAN.clear()
    store = new_store()
    handle = run_to_rest(uses_tools, store=store)
    assert handle.record.status == "parked"
    assert handle.events()[-1].payload["question"]["approve_tool"] == "delete_everything"
    answer(handle.id, "approve", store=store)
    drive(store)
    result = asyncio.run(handle.result())
    assert result[:2] == ["charged 5", "charged 6"]
    assert "limit of 2 calls" in result[2] and result[3] == "gone"
    assert RAN[0] == "charge 5 key=call_1" and RAN[1].startswith(f"charge 6 key={handle.id}:")
    assert len(RAN) == 3  # each tool ran once, across two attempts


@agent(name="abandons_stream")
async def abandons_stream(ctx: AgentContext) -> str:
    from tests.fakes.openai_api import chat_sse
    from tests.fakes.provider import sse_reply

    streaming = chat_upstream()
    streaming.reply = lambda request: sse_reply(chat_sse("one two three four"))
    client = async_openai(streaming)
    stream = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "go"}],
        stream=True,
        max_tokens=50,
    )
    async for _ in stream:
        break
    await stream.close()
    return "stopped early"


def test_a_stream_stopped_early_is_metered_once_as_an_estimate_and_not_journaled():
    store = new_store()
    handle = run_to_rest(abandons_stream, store=store)
    assert asyncio.run(handle.result()) == "stopped early"
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert len(done) == 1 and done[0]["estimated"] is True
    assert done[0]["total_tokens"] >= 50
    assert list(Exchanges(store).scan(b"r\x00" + handle.id.encode())) == []
