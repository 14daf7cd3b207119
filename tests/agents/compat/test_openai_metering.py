"""The OpenAI and Azure drop-ins' metering: images and PDFs held and estimated at OpenAI's
bounds, not their base64 bytes, and an Azure stream's usage asked for in any run."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pyrula.agents import AgentContext, AgentLimits, LLMRate, agent
from pyrula.agents.compat.openai import AzureOpenAI
from pyrula.errors import BudgetExceeded
from pyrula.workflows import WorkflowContext, workflow
from tests.agents.compat.support import azure_dropin, llm_done, openai_dropin
from tests.fakes.clock import SkippingClock
from tests.fakes.openai_api import chat_completion, chat_sse
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply, sse_reply
from tests.runtime.support import run_to_rest

# 600 kB of image: 800,000 base64 characters, some 200,000 tokens at four bytes a token.
_IMAGE = "data:image/png;base64," + base64.b64encode(b"\x89PNG" + bytes(600_000)).decode()
_GPT_4O_IMAGE = 85 + 8 * 170  # gpt-4o: 85 tokens and 170 for each of at most 8 tiles
_LARGEST_IMAGE = 2_833 + 8 * 5_667  # gpt-4o-mini's, the largest of any OpenAI model
_MAX_TOKENS = 100


def _stub() -> Upstream:
    def reply(request: Any) -> Any:
        body = json.loads(request.content)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return sse_reply(chat_sse("Pong .", usage=usage))
        return json_reply(chat_completion("Pong."))

    return Upstream(OPENAI_LIB, reply)


def _client(stub: Upstream, azure: bool, **kw: Any) -> Any:
    return azure_dropin(stub, **kw) if azure else openai_dropin(stub, **kw)


def _image_question(**kw: Any) -> dict[str, Any]:
    content = [
        {"type": "text", "text": "What is in it?"},
        {"type": "image_url", "image_url": {"url": _IMAGE}},
    ]
    # On Azure `model` is a deployment: named like a model here, yet it says nothing certain.
    return {
        "model": "gpt-4o",
        "max_tokens": _MAX_TOKENS,
        "messages": [{"role": "user", "content": content}],
        **kw,
    }


# Azure counts the image at the largest bound, since a deployment does not say which model it is.
_CLIENTS = {"openai": (False, _GPT_4O_IMAGE), "azure": (True, _LARGEST_IMAGE)}


@pytest.mark.parametrize("name", sorted(_CLIENTS))
def test_a_base64_image_is_held_to_the_cap_at_its_bound_not_its_bytes(name):
    azure, bound = _CLIENTS[name]
    stub = _stub()
    refused: list[BudgetExceeded] = []

    # Counted by its bytes the image alone would be some 200,000 tokens, over this cap.
    @agent(name=f"openai_image_held_{name}", limits=AgentLimits(max_total_tokens=60_000))
    async def body(ctx: AgentContext) -> None:
        client = _client(stub, azure)
        await client.chat.completions.create(**_image_question())
        try:  # a cap below the bound itself still refuses the call
            await client.chat.completions.create(**_image_question(max_tokens=60_000 - bound))
        except BudgetExceeded as exc:
            refused.append(exc)

    handle = run_to_rest(body)
    assert handle.record.status == "completed" and len(stub.calls) == 1
    [exc] = refused
    assert exc.limit == "max_total_tokens"
    # What the message says the call would take: the bound, the text and the output cap.
    held = int(str(exc).split("up to ")[1].split(" more")[0])
    assert 60_000 < held <= 60_000 + 200


@pytest.mark.parametrize("name", sorted(_CLIENTS))
def test_an_abandoned_stream_counts_an_image_at_the_openai_bound(name):
    azure, bound = _CLIENTS[name]
    stub = _stub()

    @agent(name=f"openai_image_abandoned_{name}")
    async def body(ctx: AgentContext) -> None:
        stream = await _client(stub, azure).chat.completions.create(**_image_question(stream=True))
        async for _chunk in stream:
            break
        await stream.close()

    handle = run_to_rest(body)
    [done] = llm_done(handle)
    assert done["estimated"] and done["abandoned_at"] == "main/llm0"
    # The image's bound, the question's few tokens and the output cap; not 200,000.
    assert bound + _MAX_TOKENS <= done["total_tokens"] <= bound + _MAX_TOKENS + 200


@pytest.mark.parametrize(
    ("name", "tokens_per_minute", "waits"),
    [("openai", 4_000, False), ("azure", 4_000, True), ("azure", 100_000, False)],
)
def test_a_rate_limit_slot_is_charged_an_image_at_the_openai_bound(name, tokens_per_minute, waits):
    azure, _bound = _CLIENTS[name]
    clock = SkippingClock()
    key = f"media-{name}-{tokens_per_minute}"
    rate = LLMRate(tokens_per_minute=tokens_per_minute, key=key, clock=clock)
    stub = _stub()

    @agent(name=f"openai_image_rate_{name}_{tokens_per_minute}")
    async def body(ctx: AgentContext) -> None:
        client = _client(stub, azure, rate_limit=rate)
        for _ in range(2):  # a stream keeps the estimate it was charged
            stream = await client.chat.completions.create(**_image_question(stream=True))
            async for _chunk in stream:
                pass

    handle = run_to_rest(body)
    assert handle.record.status == "completed", handle.events()[-1].payload
    # Two calls of about 1,600 tokens fit in 4,000 a minute; two of about 48,300 (an Azure
    # deployment, at the largest bound) only in 100,000. By their bytes, 200,000 each, neither.
    assert len(stub.calls) == 2 and bool(clock.waits) is waits


def test_a_pdf_on_azure_counts_each_page_at_its_text_and_the_largest_image_bound():
    kids = b"\n".join(b"%d 0 obj << /Type /Page >> endobj" % n for n in range(3))
    pdf = base64.b64encode(b"%PDF-1.4\n" + kids + bytes(300_000)).decode()
    file = {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{pdf}"}
    ask = {
        **_image_question(stream=True),
        "messages": [{"role": "user", "content": [{"type": "file", "file": file}]}],
    }
    stub = _stub()

    @agent(name="openai_pdf_abandoned_azure")
    async def body(ctx: AgentContext) -> None:
        stream = await _client(stub, azure=True).chat.completions.create(**ask)
        async for _chunk in stream:
            break
        await stream.close()

    [done] = llm_done(run_to_rest(body))
    pages = 3 * (3_000 + _LARGEST_IMAGE)
    assert done["estimated"] and pages <= done["total_tokens"] <= pages + _MAX_TOKENS + 200


# -- an Azure stream asks for its usage in any run ---------------------------------------------


async def _read(client: Any, helper: bool) -> str:
    ask = {"model": "team-prod", "messages": [{"role": "user", "content": "Ping?"}]}
    if helper:
        async with client.chat.completions.stream(**ask) as stream:
            return "".join([e.delta async for e in stream if e.type == "content.delta"])
    stream = await client.chat.completions.create(**ask, stream=True)
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


@pytest.mark.parametrize("helper", [False, True], ids=["create", "stream_helper"])
def test_a_workflow_azure_stream_asks_for_usage_and_is_metered_exactly(helper):
    stub = _stub()

    @workflow(name=f"azure_stream_usage_{helper}")
    async def body(ctx: WorkflowContext) -> str:
        return await _read(_client(stub, azure=True), helper)

    handle = run_to_rest(body)
    assert handle.record.status == "completed"
    assert stub.calls[0]["stream_options"] == {"include_usage": True}
    [done] = llm_done(handle)
    # The usage chunk's counts (tests.fakes.openai_api.STREAM_USAGE), not an estimate.
    assert (done["input_tokens"], done["output_tokens"], done["total_tokens"]) == (3, 4, 7)
    assert done["estimated"] is False and done["requested_model"] == "team-prod"


def test_a_sync_azure_stream_in_a_workflow_thread_asks_for_usage_too():
    stub = _stub()

    def read(client: AzureOpenAI) -> str:
        ask = {"model": "team-prod", "messages": [{"role": "user", "content": "Ping?"}]}
        with client.chat.completions.create(**ask, stream=True) as stream:
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    @workflow(name="azure_stream_usage_sync")
    async def body(ctx: WorkflowContext) -> str:
        return await ctx.to_thread(read, azure_dropin(stub, sync=True))

    handle = run_to_rest(body)
    assert stub.calls[0]["stream_options"] == {"include_usage": True}
    [done] = llm_done(handle)
    assert done["total_tokens"] == 7 and done["estimated"] is False


def test_a_plain_openai_stream_in_a_workflow_is_sent_as_written():
    stub = _stub()

    @workflow(name="openai_stream_as_written")
    async def body(ctx: WorkflowContext) -> str:
        return await _read(_client(stub, azure=False), helper=False)

    run_to_rest(body)
    assert "stream_options" not in stub.calls[0]


def test_an_azure_callers_own_include_usage_is_kept():
    stub = _stub()

    @workflow(name="azure_stream_declined")
    async def body(ctx: WorkflowContext) -> None:
        stream = await _client(stub, azure=True).chat.completions.create(
            model="team-prod",
            messages=[{"role": "user", "content": "Ping?"}],
            stream=True,
            stream_options={"include_usage": False},
        )
        async for _chunk in stream:
            pass

    run_to_rest(body)
    assert stub.calls[0]["stream_options"] == {"include_usage": False}
