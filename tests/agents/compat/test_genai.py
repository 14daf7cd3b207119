"""The Gemini drop-in: replay equality per journaled surface, errors, refusals, conversion, the
transports it installs, what the journal stores, and metering."""

from __future__ import annotations

import base64
import inspect
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import google.genai
import pydantic
import pytest
from google.genai import errors, types

from pyrula.agents import (
    AgentContext,
    AgentLimits,
    ReplayInputChanged,
    UnjournaledSurface,
    agent,
    tool,
)
from pyrula.agents.compat import genai
from pyrula.journal.store import open_store
from pyrula.runtime.client import answer
from pyrula.transport.adapters import (
    AsyncHttpx2Transport,
    AsyncHttpxTransport,
    Httpx2Transport,
    HttpxTransport,
)
from tests.agents.compat.support import dumped, park_and_resume
from tests.fakes.gemini_api import (
    ANSWER,
    GENAI_LIB,
    MODEL,
    make_client,
    response,
    sse,
    stream_chunks,
    upstream,
)
from tests.fakes.provider import TEST_KEY, json_reply
from tests.runtime.support import drive, run_to_rest

_JOURNAL = (AsyncHttpx2Transport, AsyncHttpxTransport, Httpx2Transport, HttpxTransport)


class Answer(pydantic.BaseModel):
    answer: str


# -- each journaled surface: a resume replays what the live call returned ------------------------


async def _aio_generate(c: Any, ctx: AgentContext) -> Any:
    return await c.aio.models.generate_content(model=MODEL, contents="Ping?")


async def _aio_stream(c: Any, ctx: AgentContext) -> Any:
    stream = await c.aio.models.generate_content_stream(model=MODEL, contents="Ping?")
    return [chunk async for chunk in stream]


async def _aio_chat(c: Any, ctx: AgentContext) -> Any:
    chat = c.aio.chats.create(model=MODEL)
    return [await chat.send_message("Ping?"), chat.get_history()]


async def _aio_chat_stream(c: Any, ctx: AgentContext) -> Any:
    chat = c.aio.chats.create(model=MODEL)
    return [chunk async for chunk in await chat.send_message_stream("Ping?")]


async def _aio_parsed(c: Any, ctx: AgentContext) -> Any:
    config = {"response_mime_type": "application/json", "response_schema": Answer}
    reply = await c.aio.models.generate_content(model=MODEL, contents="Ping?", config=config)
    assert isinstance(reply.parsed, Answer)
    return [reply, reply.parsed]


async def _sync_generate(c: Any, ctx: AgentContext) -> Any:
    return await ctx.to_thread(lambda: c.models.generate_content(model=MODEL, contents="Ping?"))


async def _sync_stream(c: Any, ctx: AgentContext) -> Any:
    return await ctx.to_thread(
        lambda: list(c.models.generate_content_stream(model=MODEL, contents="Ping?"))
    )


async def _sync_chat(c: Any, ctx: AgentContext) -> Any:
    def turn() -> Any:
        chat = c.chats.create(model=MODEL)
        return [chat.send_message("Ping?"), chat.get_history()]

    return await ctx.to_thread(turn)


async def _sync_chat_stream(c: Any, ctx: AgentContext) -> Any:
    return await ctx.to_thread(
        lambda: list(c.chats.create(model=MODEL).send_message_stream("Ping?"))
    )


SURFACE_CALLS = [
    _aio_generate,
    _aio_stream,
    _aio_chat,
    _aio_chat_stream,
    _aio_parsed,
    _sync_generate,
    _sync_stream,
    _sync_chat,
    _sync_chat_stream,
]


@pytest.mark.parametrize("call", SURFACE_CALLS, ids=lambda f: f.__name__.strip("_"))
def test_live_then_replay_gives_the_same_result(call):
    stub = upstream()
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        results.append(dumped(await call(make_client(stub), ctx)))

    park_and_resume(body, f"genai_equal_{call.__name__}")
    assert len(stub.seen) == 1, stub.seen  # the resume sent nothing
    assert len(results) == 2 and results[0] == results[1]


def test_the_replayed_reply_is_the_sdks_own_type():
    stub = upstream()
    kinds: list[type] = []

    async def body(ctx: AgentContext) -> None:
        kinds.append(type(await _aio_generate(make_client(stub), ctx)))
        kinds.extend(type(chunk) for chunk in await _aio_stream(make_client(stub), ctx))

    park_and_resume(body, "genai_types")
    assert set(kinds) == {types.GenerateContentResponse}


def test_a_sync_call_on_the_loop_thread_is_refused_before_sending():
    stub = upstream()
    caught: list[BaseException] = []

    @agent(name="genai_loop_thread")
    async def body(ctx: AgentContext) -> None:
        try:
            make_client(stub).models.generate_content(model=MODEL, contents="Ping?")
        except UnjournaledSurface as exc:
            caught.append(exc)

    run_to_rest(body)
    assert stub.seen == [] and len(caught) == 1 and "ctx.to_thread" in str(caught[0])


def test_outside_a_run_calls_pass_through_with_a_warning():
    stub = upstream()
    with pytest.warns(UserWarning, match="outside a Pyrula run"):
        reply = make_client(stub).models.generate_content(model=MODEL, contents="Ping?")
    assert reply.text == ANSWER and len(stub.seen) == 1


# -- errors: journaled once, replayed as the SDK's own exception ---------------------------------


def _failing(status: int, body: dict[str, Any]) -> Any:
    def reply(request: Any) -> Any:
        return json_reply(body, status=status)

    return reply


@pytest.mark.parametrize(("status", "kind"), [(429, errors.ClientError), (503, errors.ServerError)])
def test_an_error_reply_replays_as_the_same_sdk_error(status, kind):
    error = {"error": {"code": status, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}
    stub = upstream(_failing(status, error))
    raised: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await make_client(stub).aio.models.generate_content(model=MODEL, contents="Ping?")
        except errors.APIError as exc:
            raised.append((type(exc), exc.code, exc.status, exc.message, exc.details))

    park_and_resume(body, f"genai_error_{status}")
    assert len(stub.seen) == 1, stub.seen
    assert len(raised) == 2 and raised[0] == raised[1]
    assert raised[0][:4] == (kind, status, "RESOURCE_EXHAUSTED", "slow down")


def test_a_read_timeout_replays_as_the_same_transport_error():
    def reply(request: Any) -> Any:
        raise GENAI_LIB.ReadTimeout("timed out", request=request)

    stub = upstream(reply)
    raised: list[str] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await make_client(stub).aio.models.generate_content(model=MODEL, contents="Ping?")
        except GENAI_LIB.ReadTimeout as exc:
            raised.append(f"{type(exc).__name__}: {exc}")

    park_and_resume(body, "genai_read_timeout")
    assert len(stub.seen) == 1 and raised == ["ReadTimeout: timed out"] * 2


def test_a_connection_that_was_never_made_is_not_journaled():
    def reply(request: Any) -> Any:
        raise GENAI_LIB.ConnectError("refused", request=request)

    stub = upstream(reply)

    async def body(ctx: AgentContext) -> None:
        with pytest.raises(GENAI_LIB.ConnectError):
            await make_client(stub).aio.models.generate_content(model=MODEL, contents="Ping?")

    park_and_resume(body, "genai_connect_error")
    assert len(stub.seen) == 2  # asked again on resume


# -- refusals: tools -----------------------------------------------------------------------------


def lookup(city: str) -> str:
    """Look up the weather in a city."""
    return "sunny"


_NO_AFC = {"disable": True}
REFUSED_TOOLS = [
    pytest.param({"tools": [lookup]}, "a Python function", id="function-with-afc"),
    pytest.param(
        {"tools": [lookup], "automatic_function_calling": {"maximum_remote_calls": 3}},
        "a Python function",
        id="function-with-afc-calls",
    ),
    pytest.param({"tools": [{"code_execution": {}}]}, "code_execution", id="code-execution"),
    pytest.param({"tools": [{"codeExecution": {}}]}, "code_execution", id="camel-case"),
    pytest.param({"tools": [{"future_tool": {}}]}, "future_tool", id="unknown-field"),
    pytest.param(
        {"tools": [types.Tool(code_execution=types.ToolCodeExecution())]},
        "code_execution",
        id="tool-model",
    ),
]
ALLOWED_TOOLS = [
    pytest.param({"tools": [lookup], "automatic_function_calling": _NO_AFC}, id="function-no-afc"),
    pytest.param(
        {"tools": [lookup], "automatic_function_calling": {"maximum_remote_calls": 0}},
        id="function-zero-calls",
    ),
    pytest.param({"tools": [{"google_search": {}}, {"url_context": {}}]}, id="read-only"),
    pytest.param(
        {"tools": [types.Tool(function_declarations=[{"name": "f", "description": "d"}])]},
        id="declarations",
    ),
]


@pytest.mark.parametrize(("config", "named"), REFUSED_TOOLS)
@pytest.mark.parametrize("aio", [True, False], ids=["aio", "sync"])
def test_a_tool_that_acts_is_refused_before_sending(config, named, aio):
    stub = upstream()
    caught: list[BaseException] = []

    @agent(name=f"genai_tool_refused_{named}_{aio}")
    async def body(ctx: AgentContext) -> None:
        client = make_client(stub)
        try:
            if aio:
                await client.aio.models.generate_content(model=MODEL, contents="x", config=config)
            else:
                await ctx.to_thread(
                    lambda: client.models.generate_content(model=MODEL, contents="x", config=config)
                )
        except UnjournaledSurface as exc:
            caught.append(exc)

    run_to_rest(body)
    assert stub.seen == [] and len(caught) == 1 and named in str(caught[0])


@pytest.mark.parametrize("unit", ["step", "tool"])
def test_automatic_function_calling_is_refused_inside_a_step_or_tool_too(unit):
    stub = upstream()
    caught: list[BaseException] = []

    async def ask_with_afc() -> None:
        client = make_client(stub)
        try:
            await client.aio.models.generate_content(
                model=MODEL, contents="x", config={"tools": [lookup]}
            )
        except UnjournaledSurface as exc:
            caught.append(exc)

    as_tool = tool(name=f"genai_afc_in_{unit}")(ask_with_afc)

    @agent(name=f"genai_afc_in_{unit}")
    async def body(ctx: AgentContext) -> None:
        if unit == "step":
            await ctx.step("ask", ask_with_afc)
        else:
            await as_tool()

    run_to_rest(body)
    assert stub.seen == [] and len(caught) == 1
    assert "inside a step or tool" in str(caught[0]) and "a Python function" in str(caught[0])


@pytest.mark.parametrize("config", ALLOWED_TOOLS)
def test_declared_and_read_only_tools_are_journaled(config):
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        await make_client(stub).aio.models.generate_content(
            model=MODEL, contents="x", config=config
        )

    park_and_resume(body, f"genai_tool_allowed_{len(config)}_{id(config)}")
    assert len(stub.seen) == 1


def test_a_changed_function_signature_refuses_the_resume():
    def lookup_v2(city: str, country: str) -> str:
        """Look up the weather in a city."""
        return "sunny"

    lookup_v2.__name__ = "lookup"
    functions = iter([lookup, lookup_v2])
    stub = upstream()
    raised: list[BaseException] = []

    async def body(ctx: AgentContext) -> None:
        config = {"tools": [next(functions)], "automatic_function_calling": _NO_AFC}
        try:
            await make_client(stub).aio.models.generate_content(
                model=MODEL, contents="x", config=config
            )
        except ReplayInputChanged as exc:
            raised.append(exc)

    park_and_resume(body, "genai_signature_changed")
    assert len(stub.seen) == 1 and len(raised) == 1 and "tools" in str(raised[0])


# -- the transports the drop-in installs ---------------------------------------------------------


def _transports(client: Any) -> tuple[Any, Any]:
    api = client._api_client
    return api._httpx_client._transport, api._async_httpx_client._transport


@pytest.mark.parametrize("build", ["drop-in", "journaled"])
def test_async_calls_never_slip_out_through_aiohttp(build):
    """With no transport of the caller's, the SDK would pick aiohttp (installed with
    google-genai 2.x) or a pool per event loop (3.x); both go past a wrapped transport."""
    if build == "drop-in":
        client = genai.Client(api_key=TEST_KEY)
    else:
        client = genai.journaled(google.genai.Client(api_key=TEST_KEY))
    api = client._api_client
    assert not api._use_aiohttp()
    assert not getattr(api._async_httpx_client, "_per_loop", False)
    sync, async_ = _transports(client)
    assert isinstance(sync, _JOURNAL) and isinstance(async_, _JOURNAL)


def test_the_default_clients_send_through_the_journal():
    stub = upstream()
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        client = genai.Client(api_key=TEST_KEY, http_options={"base_url": "http://genai.test"})
        for transport in _transports(client):
            transport._inner = stub.transport()  # the network, stood in for under the journal
        results.append(dumped(await _aio_generate(client, ctx)))
        results.append(dumped(await _sync_generate(client, ctx)))

    park_and_resume(body, "genai_default_transports")
    assert len(stub.seen) == 2 and results[:2] == results[2:]


def test_journaled_converts_a_built_client_in_place():
    stub = upstream()
    client = make_client(stub, cls=google.genai.Client)
    aio_before = client.aio
    assert genai.journaled(client) is client
    assert isinstance(client, google.genai.Client) and isinstance(client, genai.Client)
    assert type(aio_before) is google.genai.client.AsyncClient  # taken before: the SDK's own
    assert type(client.aio).__name__ == "_Guard"
    assert genai.journaled(client) is client  # converting twice is a no-op

    async def body(ctx: AgentContext) -> None:
        await _aio_generate(client, ctx)
        await _sync_generate(client, ctx)

    park_and_resume(body, "genai_converted")
    assert len(stub.seen) == 2


def test_journaled_keeps_a_callers_own_subclass():
    class Mine(google.genai.Client):
        pass

    client = genai.journaled(make_client(upstream(), cls=Mine))
    assert isinstance(client, Mine) and type(client).__name__ == "Mine"
    assert type(client.models).__name__ == "_Guard"


def test_journaled_refuses_what_is_not_a_genai_client():
    with pytest.raises(TypeError, match=r"google\.genai\.Client"):
        genai.journaled(object())


def test_names_forward_to_google_genai():
    assert genai.types is types and genai.errors is errors
    assert issubclass(genai.Client, google.genai.Client)
    assert "http_options" in inspect.signature(google.genai.Client.__init__).parameters


# -- what the journal stores ---------------------------------------------------------------------


def _run_in_store(body: Any, name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="pyrula-genai-"))
    store = open_store(path)

    @agent(name=name)
    async def parked(ctx: AgentContext) -> str:
        await body(ctx)
        await ctx.interrupt("go on?")
        return "done"

    handle = run_to_rest(parked, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "completed"
    return path


def _raw(path: Path) -> bytes:
    return b"".join(f.read_bytes() for f in path.rglob("*") if f.is_file())


def test_the_api_key_never_reaches_the_store():
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        # `params` puts the key in the query too, as `?key=` clients do.
        client = make_client(stub)
        client._api_client._httpx_client.params = {"key": TEST_KEY}
        client._api_client._async_httpx_client.params = {"key": TEST_KEY}
        await _aio_generate(client, ctx)
        await _sync_stream(client, ctx)

    raw = _raw(_run_in_store(body, "genai_secrets"))
    assert any(h.get("x-goog-api-key") == TEST_KEY for h in stub.headers_seen)
    assert b"generateContent" in raw  # the scan reads the journal
    assert TEST_KEY.encode() not in raw


def test_inline_bytes_are_compared_by_digest_and_never_stored():
    pdf = b"%PDF-1.7 planted-document-bytes " * 8
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        part = types.Part.from_bytes(data=pdf, mime_type="application/pdf")
        await make_client(stub).aio.models.generate_content(
            model=MODEL, contents=[part, "Summarise."]
        )

    raw = _raw(_run_in_store(body, "genai_inline_bytes"))
    assert len(stub.seen) == 1
    assert base64.b64encode(pdf) not in raw and pdf not in raw


# -- metering ------------------------------------------------------------------------------------

_RICH_USAGE = {
    "promptTokenCount": 100,
    "toolUsePromptTokenCount": 20,
    "cachedContentTokenCount": 30,
    "candidatesTokenCount": 5,
    "thoughtsTokenCount": 7,
    "totalTokenCount": 132,
}


@pytest.mark.parametrize("streamed", [False, True])
def test_usage_is_metered_from_usage_metadata(streamed):
    def reply(request: Any) -> Any:
        if streamed:
            return 200, {"content-type": "text/event-stream"}, sse(stream_chunks(usage=_RICH_USAGE))
        return json_reply({**response(), "usageMetadata": _RICH_USAGE})

    stub = upstream(reply)

    async def body(ctx: AgentContext) -> None:
        await (_aio_stream if streamed else _aio_generate)(make_client(stub), ctx)

    handle = park_and_resume(body, f"genai_metering_{streamed}")
    (done,) = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert (done["input_tokens"], done["cache_read_tokens"], done["output_tokens"]) == (90, 30, 12)
    assert done["model"] == MODEL and done["estimated"] is False


def test_a_stream_stopped_early_is_metered_once_as_an_estimate():
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        stream = await make_client(stub).aio.models.generate_content_stream(
            model=MODEL, contents="Ping?"
        )
        async for _ in stream:
            break
        await stream.aclose()

    handle = park_and_resume(body, "genai_stopped_early")
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert len(stub.seen) == 2  # not journaled: a resume asks again
    assert len(done) == 2 and all(d["estimated"] for d in done)


def test_the_chat_history_of_a_replayed_turn_is_the_live_one():
    stub = upstream()
    histories: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        chat = make_client(stub).aio.chats.create(model=MODEL)
        await chat.send_message("one")
        await chat.send_message("two")
        histories.append(json.dumps(dumped(chat.get_history())))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        park_and_resume(body, "genai_chat_history")
    assert len(stub.seen) == 2 and histories[0] == histories[1]


def test_an_automatic_continuation_replays_every_hop_with_nothing_sent():
    """google-genai 2.x+ sends follow-up requests inside one call while a reply stops at
    `finish_reason=CONTINUATION` (automatic continuation). Each hop is a request of its own, so
    it is journaled at a position of its own; a resume replays them all and sends nothing."""
    if not genai_continues():
        pytest.skip("this google-genai has no automatic continuation")
    token = base64.b64encode(b"resume-here").decode()

    def reply(request: Any) -> Any:
        body = json.loads(request.content)
        if "continuationToken" not in json.dumps(body):
            return json_reply(response("Part one", finish="CONTINUATION", continuationToken=token))
        return json_reply(response(" and part two."))

    stub = upstream(reply)
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        client = make_client(stub)
        config = {"automatic_continuation": True}
        reply = await client.aio.models.generate_content(model=MODEL, contents="x", config=config)
        results.append(dumped(reply))

    handle = park_and_resume(body, "genai_continuation")
    assert len(stub.seen) == 2 and results[0] == results[1]
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert [d["position"] for d in done] == ["main/llm0", "main/llm1"]  # one per hop


def test_each_continuation_hop_counts_as_a_call_toward_max_llm_calls():
    """docs/compat-genai.md: a hop is a journaled call of its own, held to the caps before it is
    sent, so `max_llm_calls=1` stops a continued call after its first hop, which stays
    journaled."""
    if not genai_continues():
        pytest.skip("this google-genai has no automatic continuation")
    token = base64.b64encode(b"resume-here").decode()

    def reply(request: Any) -> Any:
        if "continuationToken" not in request.content.decode():
            return json_reply(response("Part one", finish="CONTINUATION", continuationToken=token))
        return json_reply(response(" and part two."))

    stub = upstream(reply)

    @agent(name="genai_continuation_capped", limits=AgentLimits(max_llm_calls=1))
    async def capped(ctx: AgentContext) -> Any:
        config = {"automatic_continuation": True}
        client = make_client(stub)
        return await client.aio.models.generate_content(model=MODEL, contents="x", config=config)

    handle = run_to_rest(capped)
    assert handle.record.status == "budget_exceeded"
    assert handle.record.error is not None and handle.record.error["limit"] == "max_llm_calls"
    assert len(stub.seen) == 1  # the second hop was never sent
    done = [e.payload["position"] for e in handle.events() if e.type == "llm:done"]
    assert done == ["main/llm0"]


def genai_continues() -> bool:
    return "automatic_continuation" in types.GenerateContentConfig.model_fields
