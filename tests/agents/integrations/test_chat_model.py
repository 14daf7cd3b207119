"""`durable_chat_model`: async calls journaled in a run and replayed on resume, the sync path
refused in a run, passthrough outside one, caps before sending, one `llm:done` per call."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import openai
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from pyrula.agents import (
    AgentContext,
    AgentLimits,
    ReplayInputChanged,
    UnjournaledSurface,
    agent,
)
from pyrula.agents.integrations import DurableChatModel, durable_chat_model
from pyrula.runtime import Worker, answer, cancel, submit
from tests.agents.integrations.langchain_support import chat_openai, chat_upstream, reply_for
from tests.fakes.anthropic_api import upstream as anthropic_upstream
from tests.fakes.openai_api import chat_sse
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply, sse_reply
from tests.fakes.server import Server, serving
from tests.runtime.support import drive, new_store, run_to_rest


def _llm_done(handle: Any) -> list[Any]:
    return [e for e in handle.events() if e.type == "llm:done"]


def _park_then_resume(body: Any, name: str, **limits: Any) -> Any:
    """Run `body` in an agent that parks on an interrupt after it, answer, and resume: the
    body runs twice, the second time from the journal."""

    @agent(name=name, limits=AgentLimits(**limits) if limits else None)
    async def parked(ctx: AgentContext) -> Any:
        result = await body(ctx)
        await ctx.interrupt("go on?")
        return result

    store = new_store()
    handle = run_to_rest(parked, store=store)
    assert handle.record.status == "parked", handle.events()[-1].payload
    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "completed", handle.events()[-1].payload
    return handle


class Weather(BaseModel):
    city: str
    degrees: int


def test_ainvoke_astream_abatch_are_journaled_and_replayed_without_a_provider_call():
    upstream = chat_upstream()
    model = durable_chat_model(chat_openai(upstream))
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> Any:
        one = await model.ainvoke([HumanMessage("Ping?")])
        chunks = [chunk async for chunk in model.astream("Stream?")]
        batch = await model.abatch(["A?", "B?"])
        seen.append((one.content, [c.content for c in chunks], [b.content for b in batch]))
        return one.content

    handle = _park_then_resume(body, "lc_async_paths")
    assert len(upstream.calls) == 4  # once each, never again on the resumed attempt
    assert seen[0] == seen[1]
    assert seen[0] == ("answer to Ping?", ["answer to Stream?"], ["answer to A?", "answer to B?"])
    done = _llm_done(handle)
    assert [e.payload["position"] for e in done] == [f"main/llm{i}" for i in range(4)]
    assert all(e.payload["total_tokens"] == 11 for e in done)  # usage read from the reply
    # The provider's own exchange is journaled (what `pyrula journal show` reads).
    assert {e.payload["surface"] for e in done} == {"openai.chat"}


def test_a_model_already_on_a_pyrula_transport_writes_one_llm_done_per_call():
    upstream = chat_upstream()
    model = durable_chat_model(chat_openai(upstream, journal=True))

    async def body(ctx: AgentContext) -> Any:
        return (await model.ainvoke("Ping?")).content

    handle = _park_then_resume(body, "lc_no_double_metering")
    assert len(upstream.calls) == 1 and len(_llm_done(handle)) == 1


def test_tool_calls_and_structured_output_stay_journaled_and_replay_identically():
    upstream = chat_upstream()
    model = durable_chat_model(chat_openai(upstream))
    seen: list[Any] = []

    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    async def body(ctx: AgentContext) -> Any:
        called = await model.bind_tools([lookup]).ainvoke("Weather?")
        parsed = await model.with_structured_output(Weather).ainvoke("Weather as JSON?")
        seen.append((called.tool_calls, parsed))
        return parsed.degrees

    _park_then_resume(body, "lc_tools_structured")
    assert len(upstream.calls) == 2
    assert upstream.calls[0]["tools"][0]["function"]["name"] == "lookup"
    assert seen[0][0][0]["name"] == "lookup" and seen[0][0][0]["args"] == {"city": "Oslo"}
    assert seen[0] == seen[1] and seen[1][1] == Weather(city="Oslo", degrees=21)


def test_a_changed_request_on_resume_raises_replay_input_changed():
    upstream = chat_upstream()
    model = durable_chat_model(chat_openai(upstream))
    questions = iter(["Ping?", "Pong?"])

    @agent(name="lc_changed")
    async def body(ctx: AgentContext) -> Any:
        await model.ainvoke(next(questions))
        await ctx.interrupt("go on?")

    store = new_store()
    handle = run_to_rest(body, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "failed"
    assert handle.record.error["type"] == ReplayInputChanged.__name__
    assert "Ping?" in handle.record.error["message"] and len(upstream.calls) == 1


def test_caps_refuse_the_call_before_it_is_sent():
    upstream = chat_upstream()
    model = durable_chat_model(chat_openai(upstream))

    @agent(name="lc_capped", limits=AgentLimits(max_llm_calls=1))
    async def body(ctx: AgentContext) -> Any:
        await model.ainvoke("one")
        await model.ainvoke("two")

    handle = run_to_rest(body)
    assert handle.record.status == "budget_exceeded", handle.record
    assert [c["messages"][-1]["content"] for c in upstream.calls] == ["one"]


def test_sync_invoke_is_refused_in_a_run_and_on_its_threads_but_passes_outside():
    upstream = chat_upstream()
    model = durable_chat_model(chat_openai(upstream))
    refused: list[str] = []

    @agent(name="lc_sync_refused")
    async def body(ctx: AgentContext) -> None:
        for call in (lambda: model.invoke("Ping?"), None):
            try:
                if call is not None:
                    call()
                else:
                    await asyncio.to_thread(model.invoke, "Ping?")
            except UnjournaledSurface as exc:
                refused.append(str(exc))

    run_to_rest(body)
    assert len(refused) == 2 and "ainvoke" in refused[0]
    assert upstream.calls == []
    assert model.invoke("Ping?").content == "answer to Ping?"  # outside a run: passes through
    assert asyncio.run(model.ainvoke("Pong?")).content == "answer to Pong?"
    assert len(upstream.calls) == 2


def test_a_model_without_a_reachable_client_journals_its_chat_result():
    produced: list[str] = []

    class Counting(GenericFakeChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            produced.append(str(messages[-1].content))
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    inner = Counting(messages=iter([AIMessage("first", usage_metadata={
        "input_tokens": 5, "output_tokens": 3, "total_tokens": 8})]))  # fmt: skip
    model = durable_chat_model(inner)
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> Any:
        reply = await model.ainvoke("Hello?")
        seen.append(reply.content)
        return reply.content

    handle = _park_then_resume(body, "lc_result_fallback")
    assert produced == ["Hello?"] and seen == ["first", "first"]
    (done,) = _llm_done(handle)
    assert done.payload["total_tokens"] == 8 and done.payload["surface"] == "generic"


def test_durable_chat_model_is_a_chat_model_and_refuses_other_objects():
    model = durable_chat_model(chat_openai(chat_upstream()))
    assert isinstance(model, DurableChatModel) and durable_chat_model(model) is model
    with pytest.raises(TypeError, match="BaseChatModel"):
        durable_chat_model(json)  # type: ignore[arg-type]
    assert threading.current_thread() is threading.main_thread()


def test_chat_anthropic_is_journaled_at_its_own_http_client():
    from langchain_anthropic import ChatAnthropic as chat_anthropic

    with Server(serving(anthropic_upstream().reply)) as server:
        model = durable_chat_model(
            chat_anthropic(model="claude-test", api_key="sk-unused", base_url=server.url,
                           max_retries=0)
        )  # fmt: skip
        seen: list[Any] = []

        async def body(ctx: AgentContext) -> Any:
            reply = await model.ainvoke("Ping?")
            seen.append(reply.content)
            return reply.content

        handle = _park_then_resume(body, "lc_anthropic")
        assert server.count() == 1 and seen[0] == seen[1]
    (done,) = _llm_done(handle)
    assert done.payload["surface"] == "anthropic.messages" and done.payload["total_tokens"] == 7


def test_a_provider_error_replays_as_the_sdk_own_exception_without_a_provider_call():
    upstream = Upstream(OPENAI_LIB, lambda request: json_reply({"error": {"message": "no"}}, 400))
    model = durable_chat_model(chat_openai(upstream))
    raised: list[str] = []

    async def body(ctx: AgentContext) -> Any:
        try:
            await model.ainvoke("Ping?")
        except openai.BadRequestError as exc:
            raised.append(type(exc).__name__)

    handle = _park_then_resume(body, "lc_error_replay")
    # The same class live and replayed: the SDK's, as the chat model wraps it (langchain-openai
    # 1.7 raises its own OpenAIInvalidRequestError, a BadRequestError).
    assert len(raised) == 2 and raised[0] == raised[1] and len(upstream.calls) == 1
    assert len(_llm_done(handle)) == 1


def test_a_cancelled_run_stops_at_the_next_call_before_sending_it():
    upstream = chat_upstream()
    model = durable_chat_model(chat_openai(upstream))
    store = new_store()

    @agent(name="lc_cancel_boundary")
    async def body(ctx: AgentContext) -> Any:
        await model.ainvoke("one")
        cancel(ctx.run_id, store=store)
        await model.ainvoke("two")

    handle = run_to_rest(body, store=store)
    assert handle.record.status == "cancelled"
    assert [c["messages"][-1]["content"] for c in upstream.calls] == ["one"]


def test_a_streaming_chat_openai_is_one_journaled_call_with_its_usage():
    def streamed(request: Any) -> Any:
        options = json.loads(request.content).get("stream_options") or {}
        return sse_reply(chat_sse("Pong .", usage=bool(options.get("include_usage"))))

    upstream = Upstream(OPENAI_LIB, streamed)
    model = durable_chat_model(chat_openai(upstream, streaming=True))
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> Any:
        seen.append([chunk.content async for chunk in model.astream("Ping?")])

    handle = _park_then_resume(body, "lc_streaming")
    assert seen == [["Pong . "], ["Pong . "]] and len(upstream.calls) == 1
    (done,) = _llm_done(handle)
    assert done.payload["total_tokens"] == 7  # the usage chunk the run asked for


def test_a_retried_provider_error_replays_once_without_the_sdk_retrying_it():
    upstream = Upstream(OPENAI_LIB, lambda request: json_reply({"error": {"message": "busy"}}, 503))
    model = durable_chat_model(chat_openai(upstream, max_retries=1))
    raised: list[str] = []

    async def body(ctx: AgentContext) -> Any:
        try:
            await model.ainvoke("Ping?")
        except openai.InternalServerError as exc:
            raised.append(type(exc).__name__)

    handle = _park_then_resume(body, "lc_retried_error")
    assert len(raised) == 2 and raised[0] == raised[1]
    assert len(upstream.calls) == 2  # the live call and its one retry; nothing on replay
    assert len(_llm_done(handle)) == 1


def test_a_run_resumed_by_a_second_asyncio_run_calls_chat_openai_on_that_loop():
    """Issue 40: one worker loop parks the run, a second `asyncio.run` in the same process
    resumes it and calls the model again, through langchain-openai's default (process-wide,
    pooled) httpx client, over a real socket; the caller's `ChatOpenAI` is left as it was."""
    with Server(serving(reply_for)) as server:
        user = ChatOpenAI(
            model="gpt-4o-mini", api_key="sk-unused", base_url=f"{server.url}/v1", max_retries=0
        )  # type: ignore[arg-type]
        http = user.root_async_client._client
        before = (user.root_async_client, user.async_client, http, http._transport, http._mounts)
        model = durable_chat_model(user)

        @agent(name="lc_two_loops")
        async def body(ctx: AgentContext) -> Any:
            first = (await model.ainvoke("one?")).content
            await ctx.interrupt("go on?")
            return [first, (await model.ainvoke("two?")).content]

        store = new_store()
        handle = submit(body, store=store)
        asyncio.run(Worker(store).run(until_idle=True))
        assert handle.record.status == "parked", handle.events()[-1].payload
        answer(handle.id, "yes", store=store)
        asyncio.run(Worker(store).run(until_idle=True))
        assert handle.record.status == "completed", handle.events()[-1].payload
        assert handle.record.result == ["answer to one?", "answer to two?"]
        # "one?" once, replayed on the resumed attempt; "two?" sent from the second loop.
        assert [seen.json()["messages"][-1]["content"] for seen in server.seen] == ["one?", "two?"]
    assert len(_llm_done(handle)) == 2
    http_after = user.root_async_client._client
    after = (user.root_async_client, user.async_client, http_after, http_after._transport)
    assert all(a is b for a, b in zip(after, before, strict=False))
    assert http_after._mounts == before[4]
