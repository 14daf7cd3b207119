"""The OpenAI drop-in: the spec's examples, refused arguments, passthrough, conversion, replay."""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import httpx as legacy_httpx
import openai
import pytest

from pyrula.agents import AgentContext, UnjournaledSurface, agent
from pyrula.agents.compat import _guard
from pyrula.agents.compat import openai as compat
from pyrula.agents.compat.openai import AsyncOpenAI, OpenAI, journaled
from pyrula.agents.testing.runner import AgentRunner
from pyrula.transport import AsyncHttpx2Transport, AsyncHttpxTransport
from pyrula.transport.adapters import JournalTransport
from tests.agents.compat.support import CHAT, RESP, openai_dropin, park_and_resume
from tests.fakes.openai_api import upstream
from tests.fakes.provider import OPENAI_LIB
from tests.runtime.support import run_to_rest

_STACKS = [OPENAI_LIB] + ([legacy_httpx] if OPENAI_LIB is not legacy_httpx else [])


# -- the spec's runnable examples, as written but for the import and the SDK's stack -----------


@pytest.mark.parametrize("httpx", _STACKS, ids=lambda lib: lib.__name__)
def test_spec_responses_ping(httpx):
    provider_calls = []

    def provider(request):
        provider_calls.append(json.loads(request.content))
        return httpx.Response(200, json={
            "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-6-luna",
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",  # noqa: E501
                        "content": [{"type": "output_text", "text": "Pong.", "annotations": []}]}],
            "usage": {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 11},
        })  # fmt: skip

    @agent(name="responses_ping")
    async def ping(ctx: AgentContext) -> str:
        client = AsyncOpenAI(
            api_key="unused",
            base_url="http://openai.test/v1",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(provider)),
        )
        response = await client.responses.create(model="gpt-6-luna", input="Ping?")
        return response.output_text

    events = asyncio.run(AgentRunner(ping).run())
    assert events[-1].payload["result"] == "Pong." and len(provider_calls) == 1
    assert [e.payload["position"] for e in events if e.type == "llm:done"] == ["main/llm0"]


@pytest.mark.parametrize("httpx", _STACKS, ids=lambda lib: lib.__name__)
def test_spec_sync_ping(httpx):
    provider_calls = []

    def provider(request):
        provider_calls.append(json.loads(request.content))
        return httpx.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-6-luna",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Pong."}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
        })  # fmt: skip

    @agent(name="sync_ping")
    async def ping(ctx: AgentContext) -> str:
        client = OpenAI(
            api_key="unused",
            base_url="http://openai.test/v1",
            http_client=httpx.Client(transport=httpx.MockTransport(provider)),
        )

        def ask() -> str:
            reply = client.chat.completions.create(
                model="gpt-6-luna", messages=[{"role": "user", "content": "Ping?"}]
            )
            return reply.choices[0].message.content

        return await ctx.to_thread(ask)

    events = asyncio.run(AgentRunner(ping).run())
    assert events[-1].payload["result"] == "Pong." and len(provider_calls) == 1
    assert [e.payload["position"] for e in events if e.type == "llm:done"] == [
        "thread:main/thread0/llm0"
    ]


def test_transport_follows_the_http_client_class():
    for lib, expected in ((legacy_httpx, AsyncHttpxTransport), (OPENAI_LIB, None)):
        client = AsyncOpenAI(api_key="k", http_client=lib.AsyncClient())
        wrapped = client._client._transport
        if expected is None:
            expected = AsyncHttpx2Transport if lib.__name__ == "httpx2" else AsyncHttpxTransport
        assert isinstance(wrapped, expected)
    default = AsyncOpenAI(api_key="k")
    assert isinstance(default._client, openai.DefaultAsyncHttpxClient)


def test_mounted_transports_are_journaled_too():
    http = OPENAI_LIB.Client(mounts={"http://openai.test": OPENAI_LIB.HTTPTransport()})
    client = OpenAI(api_key="k", http_client=http)
    mounted = [t for t in client._client._mounts.values() if t is not None]
    assert mounted and all(isinstance(t, JournalTransport) for t in mounted)


# -- refused arguments on the Responses API --------------------------------------------------

REFUSED = {
    "background": {"background": True},
    "conversation": {"conversation": "conv_1"},
    "mcp": {"tools": [{"type": "mcp", "server_label": "s", "server_url": "http://mcp.test"}]},
    "code_interpreter": {"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]},
    "shell_in_container": {"tools": [{"type": "shell", "environment": {"type": "container_auto"}}]},
    "programmatic_tool_calling": {"tools": [{"type": "programmatic_tool_calling"}]},
    "image_generation": {"tools": [{"type": "image_generation"}]},
    "unknown_tool": {"tools": [{"type": "teleport"}]},
}
ALLOWED = {
    "function": {"type": "function", "name": "f", "parameters": {}, "strict": False},
    "custom": {"type": "custom", "name": "c"},
    "computer": {"type": "computer"},
    "local_shell": {"type": "local_shell"},
    "apply_patch": {"type": "apply_patch"},
    "shell_local": {"type": "shell", "environment": {"type": "local"}},
    "shell_plain": {"type": "shell"},
    "web_search": {"type": "web_search"},
    "web_search_preview": {"type": "web_search_preview"},
    "file_search": {"type": "file_search", "vector_store_ids": ["vs_1"]},
    "tool_search": {"type": "tool_search"},
}


@pytest.mark.parametrize("surface", ["create", "stream"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_argument_raises_before_sending(name, surface):
    stub = upstream()
    caught: list[BaseException] = []

    @agent(name=f"compat_refused_arg_{name}_{surface}")
    async def body(ctx: AgentContext) -> None:
        method = getattr(openai_dropin(stub).responses, surface)
        try:
            await method(**RESP, **REFUSED[name])
        except UnjournaledSurface as exc:
            caught.append(exc)

    run_to_rest(body)
    assert stub.seen == [] and len(caught) == 1


def test_stream_from_a_stored_response_is_refused():
    stub = upstream()
    caught: list[BaseException] = []

    @agent(name="compat_stream_response_id")
    async def body(ctx: AgentContext) -> None:
        try:
            openai_dropin(stub).responses.stream(response_id="resp_1")
        except UnjournaledSurface as exc:
            caught.append(exc)

    run_to_rest(body)
    assert stub.seen == [] and "response_id" in str(caught[0])


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed_tool_is_journaled(name):
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        await openai_dropin(stub).responses.create(**RESP, tools=[ALLOWED[name]])

    handle = park_and_resume(body, f"compat_allowed_{name}")
    assert stub.seen == ["POST /responses"]
    assert [e.payload["position"] for e in handle.events() if e.type == "llm:done"] == ["main/llm0"]


def test_refused_tools_are_allowed_inside_a_step():
    stub = upstream()

    @agent(name="compat_tool_in_step")
    async def body(ctx: AgentContext) -> str:
        client = openai_dropin(stub)

        async def generate() -> str:
            reply = await client.responses.create(**RESP, **REFUSED["image_generation"])
            return reply.output_text

        return await ctx.step("generate", generate)

    handle = run_to_rest(body)
    assert handle.record.status == "completed" and stub.seen == ["POST /responses"]
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert [d["within"] for d in done] == ["step"]  # metered, not journaled


# -- outside a run -----------------------------------------------------------------------------


def test_outside_a_run_everything_passes_through_with_one_warning():
    stub = upstream()
    _guard._warned.clear()
    client = openai_dropin(stub)

    async def calls() -> None:
        await client.chat.completions.create(**CHAT)
        await client.responses.create(**RESP, background=True)
        await client.models.list()
        await client.with_raw_response.models.list()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(calls())
    mine = [w for w in caught if "not journaled" in str(w.message)]
    assert len(mine) == 1 and mine[0].filename == __file__
    assert len(stub.seen) == 4


# -- journaled(), copy(), with_options() ------------------------------------------------------


def _sdk_client(stub: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="sk-unused",
        base_url="http://openai.test/v1",
        http_client=OPENAI_LIB.AsyncClient(transport=stub.transport()),
        max_retries=0,
    )


def test_journaled_converts_a_built_client_in_place():
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        client = _sdk_client(stub)
        client.chat  # noqa: B018 - a resource built before the conversion is rebuilt guarded
        assert journaled(client) is client
        assert isinstance(client, AsyncOpenAI)
        await client.chat.completions.create(**CHAT)
        with pytest.raises(UnjournaledSurface):
            client.completions.create(model="m", prompt="x")

    park_and_resume(body, "compat_journaled_in_place")
    assert stub.seen == ["POST /chat/completions"]


def test_journaled_converts_sync_azure_and_own_subclasses():
    sync = journaled(openai.OpenAI(api_key="k"))
    azure = journaled(
        openai.AzureOpenAI(api_key="k", api_version="2024-10-21", azure_endpoint="http://az.test")
    )

    class Mine(openai.AsyncOpenAI):
        pass

    mine = journaled(Mine(api_key="k"))
    assert isinstance(sync, OpenAI) and isinstance(azure, compat.AzureOpenAI)
    assert isinstance(mine, Mine) and type(mine.chat).__name__ == "Guard"
    assert journaled(sync) is sync


def test_journaled_refuses_what_is_not_an_openai_client():
    instructor_like = type("Instructor", (), {"__module__": "instructor.core.client"})()
    with pytest.raises(TypeError, match=r"instructor\.from_openai\(journaled\(client\)\)"):
        journaled(instructor_like)
    with pytest.raises(TypeError, match="openai"):
        journaled(object())


def test_copy_and_with_options_keep_journaling():
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        client = openai_dropin(stub)
        copied, tuned = client.copy(), client.with_options(timeout=5)
        assert type(copied) is AsyncOpenAI and type(tuned) is AsyncOpenAI
        await copied.chat.completions.create(**CHAT)
        await tuned.responses.create(**RESP)
        with pytest.raises(UnjournaledSurface):
            tuned.images.generate(prompt="x")

    handle = park_and_resume(body, "compat_copy_with_options")
    assert stub.seen == ["POST /chat/completions", "POST /responses"]
    assert len([e for e in handle.events() if e.type == "llm:done"]) == 2


# -- live, then replayed: the same objects, no request ----------------------------------------


async def _chat_plain(client: Any) -> Any:
    return (await client.chat.completions.create(**CHAT)).model_dump()


async def _chat_stream(client: Any) -> Any:
    stream = await client.chat.completions.create(**CHAT, stream=True)
    return [chunk.model_dump() async for chunk in stream]


async def _chat_stream_usage(client: Any) -> Any:
    stream = await client.chat.completions.create(
        **CHAT, stream=True, stream_options={"include_usage": True}
    )
    return [chunk.model_dump() async for chunk in stream]


async def _responses_plain(client: Any) -> Any:
    return (await client.responses.create(**RESP)).model_dump()


async def _responses_stream(client: Any) -> Any:
    stream = await client.responses.create(**RESP, stream=True)
    return [event.model_dump() async for event in stream]


async def _responses_parse(client: Any) -> Any:
    from tests.agents.compat.support import Answer

    parsed = await client.responses.parse(**RESP, text_format=Answer)
    return parsed.output_parsed.model_dump()


CASES = {
    "chat": _chat_plain,
    "chat_stream": _chat_stream,
    "chat_stream_usage": _chat_stream_usage,
    "responses": _responses_plain,
    "responses_stream": _responses_stream,
    "responses_parse": _responses_parse,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_live_then_replay_gives_the_same_result(case):
    stub = upstream()
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        seen.append(await CASES[case](openai_dropin(stub)))

    park_and_resume(body, f"compat_replay_{case}")
    assert len(stub.seen) == 1  # live once; the resumed attempt replayed it
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0]
