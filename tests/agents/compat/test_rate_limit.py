"""`rate_limit=` on the drop-ins: one slot per live call, none for a replay or a passthrough."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

import pytest

from pyrula.agents import AgentContext, LLMRate
from pyrula.agents.compat import Anthropic, AsyncAnthropic, AsyncOpenAI, journaled
from tests.agents.compat.support import park_and_resume
from tests.fakes import anthropic_api, openai_api
from tests.fakes.clock import SkippingClock
from tests.fakes.provider import ANTHROPIC_LIB, OPENAI_LIB

_keys = itertools.count()


def _rate(clock: SkippingClock) -> LLMRate:
    return LLMRate(requests_per_minute=1, key=f"compat-rate-{next(_keys)}", clock=clock)


_ASK = {"model": "gpt-test", "messages": [{"role": "user", "content": "Ping?"}]}


def _openai(rate: LLMRate) -> tuple[Any, Any, Callable[[Any, str], Any]]:
    stub = openai_api.upstream()
    http = OPENAI_LIB.AsyncClient(transport=stub.transport())
    client = AsyncOpenAI(api_key="k", base_url="http://o.test", http_client=http, rate_limit=rate)

    async def ask(c: Any, model: str) -> Any:
        return await c.chat.completions.create(**{**_ASK, "model": model})

    return stub, client, ask


def _anthropic(rate: LLMRate) -> tuple[Any, Any, Callable[[Any, str], Any]]:
    stub = anthropic_api.upstream()
    http = ANTHROPIC_LIB.AsyncClient(transport=stub.transport())
    client = AsyncAnthropic(api_key="k", base_url="http://a.test", http_client=http)
    journaled(client, rate_limit=rate)

    async def ask(c: Any, model: str) -> Any:
        return await c.messages.create(**{**anthropic_api.MSG, "model": model})

    return stub, client, ask


def _anthropic_sync(rate: LLMRate) -> tuple[Any, Any, Callable[[Any, str], Any]]:
    stub = anthropic_api.upstream()
    http = ANTHROPIC_LIB.Client(transport=stub.transport())
    client = Anthropic(api_key="k", base_url="http://a.test", http_client=http, rate_limit=rate)

    async def ask(c: Any, model: str) -> Any:
        ctx: AgentContext = ask.ctx  # type: ignore[attr-defined]
        return await ctx.to_thread(
            lambda: c.messages.create(**{**anthropic_api.MSG, "model": model})
        )

    return stub, client, ask


CLIENTS = {"openai": _openai, "anthropic": _anthropic, "anthropic-sync": _anthropic_sync}


@pytest.mark.parametrize("which", sorted(CLIENTS))
def test_live_calls_wait_for_a_slot_and_replays_take_none(which):
    clock = SkippingClock()
    stub, client, ask = CLIENTS[which](_rate(clock))

    async def body(ctx: AgentContext) -> None:
        ask.ctx = ctx  # type: ignore[attr-defined]
        await ask(client, "first")
        await ask(client.copy(), "second")  # a copy shares the client's limit

    park_and_resume(body, f"rate_{which}")
    assert len(stub.seen) == 2  # the resume replayed both calls
    # One request a minute: the second live call waited a minute; the replays waited for nothing.
    assert len(clock.waits) == 1 and clock.waits[0] == pytest.approx(60, rel=0.05)


def test_a_passthrough_takes_no_slot():
    clock = SkippingClock()
    _, client, ask = _openai(_rate(clock))

    async def body(ctx: AgentContext) -> None:
        await client.models.list()
        await ask(client, "only")

    park_and_resume(body, "rate_passthrough")
    assert clock.waits == []


def test_a_sync_call_with_no_run_runs_unlimited_and_warns_once(caplog):
    clock = SkippingClock()
    stub, client, _ = _anthropic_sync(_rate(clock))
    with caplog.at_level(logging.WARNING, logger="pyrula.ratelimit"), pytest.warns(UserWarning):
        for model in ("a", "b", "c"):
            client.messages.create(**{**anthropic_api.MSG, "model": model})
    assert len(stub.seen) == 3 and clock.waits == []
    assert len([r for r in caplog.records if r.name == "pyrula.ratelimit"]) == 1


def test_a_boto3_bedrock_client_waits_for_a_slot_and_replays_take_none():
    pytest.importorskip("boto3")
    from tests.fakes import bedrock_api as bs

    clock = SkippingClock()
    messages = [{"role": "user", "content": [{"text": "Ping?"}]}]
    with bs.BedrockStub(bs.converse_reply(), bs.converse_reply()) as stub:
        client = journaled(bs.client(stub), rate_limit=_rate(clock))

        async def body(ctx: AgentContext) -> None:
            for text in ("first", "second"):
                ask = [{**messages[0], "content": [{"text": text}]}]
                await ctx.to_thread(lambda: client.converse(modelId=bs.MODEL_ID, messages=ask))  # noqa: B023

        park_and_resume(body, "rate_bedrock")
        assert stub.count() == 2
    assert len(clock.waits) == 1 and clock.waits[0] == pytest.approx(60, rel=0.05)


@pytest.mark.parametrize("how", ["aio", "aio-stream", "sync-thread", "sync-stream"])
def test_a_gemini_client_waits_for_a_slot_and_replays_take_none(how):
    pytest.importorskip("google.genai")
    from pyrula.agents.compat import genai
    from tests.fakes import gemini_api

    clock = SkippingClock()
    stub = gemini_api.upstream()
    client = genai.Client(
        api_key="k", http_options=gemini_api.http_options(stub), rate_limit=_rate(clock)
    )

    async def ask(ctx: AgentContext, text: str) -> Any:
        model = gemini_api.MODEL
        if how == "aio":
            return await client.aio.models.generate_content(model=model, contents=text)
        if how == "aio-stream":
            stream = await client.aio.models.generate_content_stream(model=model, contents=text)
            return [chunk async for chunk in stream]
        if how == "sync-thread":
            return await ctx.to_thread(
                lambda: client.models.generate_content(model=model, contents=text)
            )
        return await ctx.to_thread(
            lambda: list(client.models.generate_content_stream(model=model, contents=text))
        )

    async def body(ctx: AgentContext) -> None:
        await ask(ctx, "first")
        await ask(ctx, "second")

    park_and_resume(body, f"rate_gemini_{how}")
    assert len(stub.seen) == 2
    assert len(clock.waits) == 1 and clock.waits[0] == pytest.approx(60, rel=0.05)
