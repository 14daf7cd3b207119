"""The Anthropic drop-in: replay equality per journaled surface, helpers, refusals, conversion,
errors, metering, the sync twin and the cloud clients."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import anthropic
import pydantic
import pytest

from pyrula.agents import AgentContext, UnjournaledSurface, agent
from pyrula.agents.compat import AsyncAnthropic, journaled
from pyrula.agents.compat import anthropic as compat
from pyrula.errors import SurfaceUnavailable
from pyrula.runtime.metering import Usage, prices
from tests.agents.compat.support import (
    anthropic_dropin,
    anthropic_sync_dropin,
    dumped,
    park_and_resume,
    store_bytes,
)
from tests.fakes.anthropic_api import ANSWER, MSG, anthropic_sse, upstream
from tests.fakes.provider import ANTHROPIC_LIB, Upstream, json_reply, sse_reply
from tests.runtime.support import run_to_rest

_MAJOR = int(anthropic.__version__.split(".")[0])


class Answer(pydantic.BaseModel):
    answer: str


async def _create(c: Any) -> Any:
    return await c.messages.create(**MSG)


async def _create_streamed(c: Any) -> Any:
    stream = await c.messages.create(**MSG, stream=True)
    return [event async for event in stream]


async def _stream_helper(c: Any) -> Any:
    async with c.messages.stream(**MSG) as stream:
        text = [t async for t in stream.text_stream]
        return [text, await stream.get_final_message()]


async def _beta_create(c: Any) -> Any:
    return await c.beta.messages.create(**MSG, betas=["context-1m-2025-08-07"])


async def _beta_stream_helper(c: Any) -> Any:
    async with c.beta.messages.stream(**MSG) as stream:
        return [event async for event in stream]


async def _parse(c: Any) -> Any:
    parsed = await c.messages.parse(**MSG, output_format=Answer)
    return [parsed, parsed.parsed_output]


async def _beta_parse(c: Any) -> Any:
    parsed = await c.beta.messages.parse(**MSG, output_format=Answer)
    return [parsed, parsed.parsed_output]


async def _batch(c: Any) -> Any:
    return await c.messages.batches.create(requests=[{"custom_id": "a", "params": MSG}])


async def _beta_batch(c: Any) -> Any:
    return await c.beta.messages.batches.create(requests=[{"custom_id": "a", "params": MSG}])


async def _dream(c: Any) -> Any:
    return await c.beta.dreams.create(
        inputs=[{"type": "sessions", "session_ids": ["s"]}], model="claude-test"
    )


SURFACE_CALLS = [
    _create,
    _create_streamed,
    _stream_helper,
    _beta_create,
    _beta_stream_helper,
    _parse,
    _beta_parse,
    _batch,
    _beta_batch,
    _dream,
]


@pytest.mark.parametrize("call", SURFACE_CALLS, ids=lambda f: f.__name__.strip("_"))
def test_live_then_replay_gives_the_same_result(call):
    probe = anthropic_dropin(upstream())
    resource = probe.beta.messages if call is _beta_parse else probe.messages
    if call in (_parse, _beta_parse) and not hasattr(resource, "parse"):
        pytest.skip(f"anthropic {anthropic.__version__} has no parse there")
    if call is _dream and not hasattr(probe.beta, "dreams"):
        pytest.skip(f"anthropic {anthropic.__version__} has no beta.dreams")
    stub = upstream()
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        results.append(dumped(await call(anthropic_dropin(stub))))

    park_and_resume(body, f"anthropic_equal_{call.__name__}")
    assert len(stub.seen) == 1, stub.seen  # the resume sent nothing
    assert len(results) == 2 and results[0] == results[1]


HELPER_PAIRS = [(_create_streamed, _stream_helper), (_stream_helper, _create_streamed)]


@pytest.mark.parametrize(
    ("recorded", "resumed"), HELPER_PAIRS, ids=["create-then-helper", "helper-then-create"]
)
def test_a_stream_helper_and_its_create_replay_each_other(recorded, resumed):
    stub = upstream()
    calls = iter([recorded, resumed])

    async def body(ctx: AgentContext) -> None:
        await next(calls)(anthropic_dropin(stub))

    park_and_resume(body, f"anthropic_pair_{recorded.__name__}")
    assert len(stub.seen) == 1, stub.seen


def test_parse_and_create_replay_each_other():
    if not hasattr(anthropic_dropin(upstream()).messages, "parse"):
        pytest.skip(f"anthropic {anthropic.__version__} has no messages.parse")
    stub = upstream()
    calls = iter([_plain_parse, _create])

    async def body(ctx: AgentContext) -> None:
        await next(calls)(anthropic_dropin(stub))

    park_and_resume(body, "anthropic_parse_pair")
    assert len(stub.seen) == 1, stub.seen


async def _plain_parse(c: Any) -> Any:
    return await c.messages.parse(**MSG)


def test_a_reply_the_parser_rejects_replays_as_the_same_error():
    if not hasattr(anthropic_dropin(upstream()).messages, "parse"):
        pytest.skip(f"anthropic {anthropic.__version__} has no messages.parse")

    class Strict(pydantic.BaseModel):
        answer: int  # the reply's "Pong." is not an int

    stub = upstream()
    raised: list[str] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await anthropic_dropin(stub).messages.parse(**MSG, output_format=Strict)
        except Exception as exc:
            raised.append(type(exc).__name__)

    park_and_resume(body, "anthropic_parse_rejects")
    assert len(stub.seen) == 1 and len(raised) == 2 and raised[0] == raised[1]


# -- refusals ----------------------------------------------------------------------------------

ALLOWED_TOOLS = [
    {"name": "lookup", "description": "d", "input_schema": {"type": "object"}},
    {"type": "custom", "name": "lookup", "input_schema": {"type": "object"}},
    {"type": "web_search_20250305", "name": "web_search"},
    {"type": "web_fetch_20250910", "name": "web_fetch"},
    {"type": "tool_search_tool_regex_20251119", "name": "tool_search"},
    {"type": "bash_20250124", "name": "bash"},
    {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    {"type": "computer_20250124", "name": "computer", "display_width_px": 8},
    {"type": "memory_20250818", "name": "memory"},
]
REFUSED_TOOLS = [
    {"type": "mcp_toolset", "mcp_server_name": "s"},
    {"type": "code_execution_20250825", "name": "code_execution"},
    {"type": "bash_code_execution_20250825", "name": "bash_code_execution"},
    {"type": "text_editor_code_execution_20250825", "name": "text_editor_code_execution"},
    {"type": "advisor_20260301", "name": "advisor"},
    {"type": "browser_toolset_20260101", "name": "browser"},
    {"type": "memory_server_20250101", "name": "memory"},  # a lookalike of `memory`
    {"type": "something_new", "name": "x"},
]


def _in_run(call: Any, name: str) -> tuple[Upstream, list[BaseException]]:
    stub = upstream()
    caught: list[BaseException] = []

    @agent(name=name)
    async def body(ctx: AgentContext) -> None:
        try:
            await call(anthropic_dropin(stub))
        except UnjournaledSurface as exc:
            caught.append(exc)

    run_to_rest(body)
    return stub, caught


@pytest.mark.parametrize("tool", ALLOWED_TOOLS, ids=lambda t: t.get("type", "untyped"))
@pytest.mark.parametrize("surface", ["messages", "beta.messages"])
def test_allowed_tools_are_journaled(tool, surface):
    async def call(c: Any) -> Any:
        resource = c.beta.messages if surface == "beta.messages" else c.messages
        return await resource.create(**MSG, tools=[tool])

    stub, caught = _in_run(call, f"anthropic_tool_ok_{surface}_{tool.get('type')}")
    assert caught == [] and len(stub.seen) == 1


@pytest.mark.parametrize("tool", REFUSED_TOOLS, ids=lambda t: t["type"])
@pytest.mark.parametrize("surface", ["messages", "beta.messages"])
def test_server_tools_that_act_are_refused_before_sending(tool, surface):
    async def call(c: Any) -> Any:
        resource = c.beta.messages if surface == "beta.messages" else c.messages
        return await resource.create(**MSG, tools=[tool], extra_headers={})

    stub, caught = _in_run(call, f"anthropic_tool_no_{surface}_{tool['type']}")
    assert stub.seen == [] and len(caught) == 1
    assert repr(tool["type"]) in str(caught[0]) and "ctx.step" in str(caught[0])


REFUSED_ARGUMENTS = {
    "mcp_servers": {"mcp_servers": [{"type": "url", "url": "https://mcp.test", "name": "m"}]},
    "container_skills": {"container": {"skills": [{"type": "anthropic", "skill_id": "pptx"}]}},
}


@pytest.mark.parametrize("name", sorted(REFUSED_ARGUMENTS))
def test_refused_arguments_name_the_argument(name):
    async def call(c: Any) -> Any:
        return await c.beta.messages.create(**MSG, **REFUSED_ARGUMENTS[name])

    stub, caught = _in_run(call, f"anthropic_arg_{name}")
    assert stub.seen == [] and len(caught) == 1
    assert f"({name.split('_')[0]}" in str(caught[0])


def test_a_container_by_id_is_journaled():
    create = anthropic.resources.beta.messages.AsyncMessages.create
    if "container" not in inspect.signature(create).parameters:
        pytest.skip(f"anthropic {anthropic.__version__} has no `container` parameter")

    async def call(c: Any) -> Any:
        return await c.beta.messages.create(**MSG, container="container_1")

    stub, caught = _in_run(call, "anthropic_container_id")
    assert caught == [] and len(stub.seen) == 1


def test_a_client_with_middleware_is_refused_in_a_run():
    if not hasattr(anthropic, "Middleware") and not hasattr(anthropic.Anthropic, "with_middleware"):
        pytest.skip(f"anthropic {anthropic.__version__} has no middleware")
    from anthropic._middleware import Middleware

    class Passing(Middleware):
        async def handle_async(self, request: Any, call_next: Any) -> Any:
            return await call_next(request)

    async def call(c: Any) -> Any:
        return await c.with_middleware(Passing()).messages.create(**MSG)

    stub, caught = _in_run(call, "anthropic_middleware")
    assert stub.seen == [] and len(caught) == 1 and "middleware" in str(caught[0])


def _plain_stream_takes_output_format() -> bool:
    stream = anthropic.resources.messages.AsyncMessages.stream
    return "output_format" in inspect.signature(stream).parameters


async def _stream_parsed(c: Any) -> Any:
    async with c.messages.stream(**MSG, output_format=Answer) as stream:
        final = await stream.get_final_message()
    return [final, final.parsed_output]


def test_an_output_format_stream_is_journaled_where_the_plain_manager_takes_it():
    """anthropic 0.77 and later: `messages.stream(output_format=...)` is the SDK's manager over
    one journaled call; a resume rebuilds the parsed message with nothing sent."""
    if not _plain_stream_takes_output_format():
        pytest.skip(f"anthropic {anthropic.__version__}: only the beta managers take it")
    stub = Upstream(ANTHROPIC_LIB, lambda request: sse_reply(anthropic_sse(ANSWER)))
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        results.append(dumped(await _stream_parsed(anthropic_dropin(stub))))

    park_and_resume(body, "anthropic_stream_output_format")
    assert len(stub.seen) == 1 and results[0] == results[1]
    assert results[0][1] == {"answer": "Pong."}


def test_where_only_beta_takes_output_format_the_plain_helpers_are_refused_in_a_run():
    """anthropic 0.73 to 0.76: only `beta.messages.stream` / `beta.messages.parse` take
    `output_format`. In a run the plain stream with it is refused before anything is sent, naming
    the beta helper; `messages.parse` does not exist there and says which release brings it."""
    if _plain_stream_takes_output_format():
        pytest.skip(f"anthropic {anthropic.__version__}: the plain stream takes output_format")
    stub, caught = _in_run(_stream_parsed, "anthropic_stream_beta_only")
    assert stub.seen == [] and len(caught) == 1
    assert "`messages.stream(output_format=...)`" in str(caught[0])
    assert "beta.messages.stream" in str(caught[0]) and "0.77.0" in str(caught[0])
    with pytest.raises(SurfaceUnavailable, match=r"needs anthropic 0\.77\.0 or later"):
        anthropic_dropin(stub).messages.parse  # noqa: B018


# -- conversion, copies, clouds ----------------------------------------------------------------


def test_journaled_converts_a_built_client_and_keeps_its_http_client():
    stub = upstream()
    http = ANTHROPIC_LIB.AsyncClient(transport=stub.transport())
    client = anthropic.AsyncAnthropic(api_key="k", base_url="http://a.test", http_client=http)
    assert journaled(client) is client and isinstance(client, AsyncAnthropic)
    assert client._client is http
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        results.append(dumped(await client.messages.create(**MSG)))

    park_and_resume(body, "anthropic_converted")
    assert len(stub.seen) == 1 and results[0] == results[1]


def test_journaled_refuses_clients_it_does_not_convert():
    with pytest.raises(TypeError, match="journaled"):
        journaled(object())
    foundry = getattr(anthropic, "AnthropicFoundry", None)
    if foundry is not None:
        client = foundry(api_key="k", resource="r")
        with pytest.raises(TypeError, match="AnthropicFoundry"):
            journaled(client)


@pytest.mark.parametrize("how", ["copy", "with_options"])
def test_copy_and_with_options_keep_journaling_and_the_http_client(how):
    stub = upstream()
    client = anthropic_dropin(stub)
    copied = getattr(client, how)(timeout=5)
    assert type(copied) is AsyncAnthropic and copied._client is client._client
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        results.append(dumped(await copied.messages.create(**MSG)))

    park_and_resume(body, f"anthropic_{how}")
    assert len(stub.seen) == 1 and results[0] == results[1]


def test_the_sync_twin_journals_on_a_thread_of_the_run():
    stub = upstream()
    client = anthropic_sync_dropin(stub)
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        reply = await ctx.to_thread(lambda: client.messages.create(**MSG))
        results.append(dumped(reply))

    park_and_resume(body, "anthropic_sync_thread")
    assert len(stub.seen) == 1 and results[0] == results[1]


def test_the_sync_twin_on_the_loop_thread_is_refused():
    stub = upstream()
    client = anthropic_sync_dropin(stub)
    caught: list[BaseException] = []

    @agent(name="anthropic_sync_loop")
    async def body(ctx: AgentContext) -> None:
        try:
            client.messages.create(**MSG)
        except UnjournaledSurface as exc:
            caught.append(exc)

    run_to_rest(body)
    assert stub.seen == [] and len(caught) == 1 and "ctx.to_thread" in str(caught[0])


# -- errors and metering -----------------------------------------------------------------------


def test_a_rate_limit_replays_as_the_sdk_error_with_nothing_sent():
    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        status, headers, frames = json_reply(
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, 429
        )
        return status, {**headers, "request-id": "req_429", "retry-after": "0"}, frames

    stub = Upstream(ANTHROPIC_LIB, reply)
    seen: list[dict[str, Any]] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await anthropic_dropin(stub).messages.create(**MSG)
        except anthropic.RateLimitError as exc:
            seen.append({"status": exc.status_code, "id": exc.request_id, "body": exc.body})

    park_and_resume(body, "anthropic_429")
    assert len(stub.calls) == 1 and len(seen) == 2 and seen[0] == seen[1]
    assert seen[0]["status"] == 429 and seen[0]["id"] == "req_429"


def test_usage_is_metered_with_cache_reads_and_writes():
    usage = {
        "input_tokens": 5,
        "output_tokens": 2,
        "cache_read_input_tokens": 7,
        "cache_creation_input_tokens": 11,
    }

    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        from tests.fakes.anthropic_api import anthropic_message

        return json_reply({**anthropic_message(ANSWER), "usage": usage})

    stub = Upstream(ANTHROPIC_LIB, reply)

    @agent(name="anthropic_metered")
    async def body(ctx: AgentContext) -> None:
        await anthropic_dropin(stub).messages.create(**MSG)

    handle = run_to_rest(body)
    [done] = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert (done["input_tokens"], done["output_tokens"]) == (5, 2)
    assert (done["cache_read_tokens"], done["cache_write_tokens"]) == (7, 11)


def test_a_stream_stopped_early_runs_live_again_and_is_metered_once_as_estimated():
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        stream = await anthropic_dropin(stub).messages.create(**MSG, stream=True)
        async for _event in stream:
            break
        await stream.close()

    handle = park_and_resume(body, "anthropic_stopped_early")
    assert len(stub.seen) == 2  # not journaled: the resume asked again
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert len(done) == 2 and all(d["estimated"] for d in done)


# -- the cloud clients, with fake credentials over a stand-in provider -------------------------

_AWS_SECRET = "aws-secret-planted-9f8e7d6c5b4a"
_AWS_TOKEN = "aws-session-token-planted-0a1b2c3d"
_GCP_TOKEN = "ya29.gcp-token-planted-5e6f7a8b"


def _bedrock(stub: Upstream) -> Any:
    pytest.importorskip("botocore", reason="SigV4 signing needs anthropic[bedrock]")
    return compat.AsyncAnthropicBedrock(
        aws_region="us-east-1",
        aws_access_key="AKIAPLANTEDKEY000000",
        aws_secret_key=_AWS_SECRET,
        aws_session_token=_AWS_TOKEN,
        base_url="http://bedrock.test",
        http_client=ANTHROPIC_LIB.AsyncClient(transport=stub.transport()),
        max_retries=0,
    )


def _vertex(stub: Upstream) -> Any:
    return compat.AsyncAnthropicVertex(
        region="us-east5",
        project_id="proj",
        access_token=_GCP_TOKEN,
        base_url="http://vertex.test/v1",
        http_client=ANTHROPIC_LIB.AsyncClient(transport=stub.transport()),
        max_retries=0,
    )


_CLOUD_MODELS = {
    "bedrock": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
    "vertex": "claude-haiku-4-5@20251001",
}


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("cloud", ["bedrock", "vertex"])
def test_cloud_clients_journal_without_keeping_credentials(cloud, streamed, tmp_path):
    stub = upstream()
    client = _bedrock(stub) if cloud == "bedrock" else _vertex(stub)
    model = _CLOUD_MODELS[cloud]
    results: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        if streamed:
            stream = await client.messages.create(**{**MSG, "model": model}, stream=True)
            results.append(dumped([event async for event in stream]))
        else:
            results.append(dumped(await client.messages.create(**{**MSG, "model": model})))

    handle = park_and_resume(body, f"anthropic_{cloud}_{streamed}")
    assert len(stub.seen) == 1 and results[0] == results[1]
    sent = stub.headers_seen[0]
    if cloud == "bedrock":
        assert sent["authorization"].startswith("AWS4-HMAC-SHA256")  # SigV4 really ran
    else:
        assert sent["authorization"] == f"Bearer {_GCP_TOKEN}"
    [done] = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert done["requested_model"] == model and done["model"] == "claude-haiku-4-5"
    # A stream's usage is message_start's, then message_delta's; Bedrock's own metrics on its last
    # event are not added on top.
    tokens = (5, 3) if streamed else (5, 2)
    assert (done["input_tokens"], done["output_tokens"]) == tokens
    assert done["cost_usd"] == prices.cost(Usage(None, *tokens), "claude-haiku-4-5")
    signature = sent["authorization"].rsplit("=", 1)[-1]
    kept = store_bytes(handle.run_store.store)  # its fact log's folder included
    for secret in (_AWS_SECRET, _AWS_TOKEN, _GCP_TOKEN, signature):
        assert secret.encode() not in kept


def test_bedrock_copy_keeps_the_profile_and_the_http_client():
    pytest.importorskip("botocore")
    stub = upstream()
    client = compat.AnthropicBedrock(
        aws_region="us-east-1",
        aws_profile="planted-profile",
        http_client=ANTHROPIC_LIB.Client(transport=stub.transport()),
    )
    copied = client.copy(timeout=3)
    assert type(copied) is compat.AnthropicBedrock and copied._client is client._client
    assert copied.aws_profile == "planted-profile"


def test_a_converted_bedrock_client_keeps_the_resources_the_sdk_assigned():
    client = anthropic.AnthropicBedrock(
        aws_region="us-east-1", aws_access_key="test-access", aws_secret_key="test-secret"
    )
    messages = client.messages
    journaled(client)
    assert isinstance(client, compat.AnthropicBedrock)
    assert client.messages._pyrula_target is messages
    assert asyncio.iscoroutinefunction(compat.AsyncAnthropic.__init__) is False
    assert json.dumps(compat.__all__)


def test_local_failures_on_bedrock_are_not_journaled(monkeypatch, tmp_path):
    pytest.importorskip("botocore")
    for name in [n for n in __import__("os").environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credential lookup on the network
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    stub = upstream()
    client = compat.AsyncAnthropicBedrock(
        aws_region="us-east-1",
        base_url="http://bedrock.test",
        http_client=ANTHROPIC_LIB.AsyncClient(transport=stub.transport()),
    )
    raised: list[str] = []

    async def body(ctx: AgentContext) -> None:
        for call in (_batch, _create):  # Bedrock has no batch API; no credentials to sign with
            try:
                await call(client)
            except Exception as exc:
                raised.append(type(exc).__name__)

    handle = park_and_resume(body, "anthropic_bedrock_local")
    assert stub.seen == [] and len(raised) == 4 and raised[:2] == raised[2:]
    assert [e for e in handle.events() if e.type == "llm:done"] == []


def test_breaking_out_on_message_stop_leaves_the_call_journaled():
    stub = upstream()
    kinds: list[list[str]] = []

    async def body(ctx: AgentContext) -> None:
        stream = await anthropic_dropin(stub).messages.create(**MSG, stream=True)
        seen = []
        async for event in stream:
            seen.append(event.type)
            if event.type == "message_stop":
                break
        await stream.close()
        kinds.append(seen)

    handle = park_and_resume(body, "anthropic_break_on_stop")
    assert len(stub.seen) == 1 and kinds[0] == kinds[1] and kinds[0][-1] == "message_stop"
    [done] = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert done["estimated"] is False and done["output_tokens"] == 3


def test_a_stream_without_message_stop_raises_and_replays_the_error():
    from pyrula.agents import ProviderStreamTruncated
    from tests.fakes.anthropic_api import anthropic_sse
    from tests.fakes.provider import sse_reply

    stub = Upstream(ANTHROPIC_LIB, lambda request: sse_reply(anthropic_sse("Pong .", stop=False)))
    caught: list[str] = []

    async def body(ctx: AgentContext) -> None:
        try:
            stream = await anthropic_dropin(stub).messages.create(**MSG, stream=True)
            async for _event in stream:
                pass
        except ProviderStreamTruncated as exc:
            caught.append(str(exc))

    park_and_resume(body, "anthropic_truncated")
    assert len(stub.calls) == 1 and len(caught) == 2 and caught[0] == caught[1]


def test_a_replayed_message_has_no_request_id():
    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        from tests.fakes.anthropic_api import anthropic_message

        status, headers, frames = json_reply(anthropic_message(ANSWER))
        return status, {**headers, "request-id": "req_live_1"}, frames

    stub = Upstream(ANTHROPIC_LIB, reply)
    ids: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        ids.append((await anthropic_dropin(stub).messages.create(**MSG))._request_id)

    park_and_resume(body, "anthropic_request_id")
    assert ids == ["req_live_1", None] and len(stub.calls) == 1


def _pdf(pages: int) -> bytes:
    kids = " ".join(f"{n + 3} 0 R" for n in range(pages))
    objects = [b"%PDF-1.4", b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj"]
    objects.append(f"2 0 obj << /Type /Pages /Kids [{kids}] /Count {pages} >> endobj".encode())
    objects += [
        f"{n + 3} 0 obj << /Type /Page /Parent 2 0 R >> endobj".encode() for n in range(pages)
    ]
    return b"\n".join([*objects, b"%%EOF"])


@pytest.mark.parametrize(
    ("block", "at_least", "at_most"),
    [
        (
            {"type": "image", "media_type": "image/png", "data": b"\x89PNG" + bytes(400_000)},
            1_600,
            3_000,
        ),
        ({"type": "document", "media_type": "application/pdf", "data": _pdf(3)}, 3 * 4_600, 16_000),
    ],
    ids=["image", "pdf"],
)
def test_an_abandoned_stream_counts_media_at_anthropics_bounds(block, at_least, at_most):
    import base64

    source = {
        "type": "base64",
        "media_type": block["media_type"],
        "data": base64.b64encode(block["data"]).decode(),
    }
    content = [{"type": block["type"], "source": source}, {"type": "text", "text": "What?"}]
    ask = {**MSG, "max_tokens": 1, "messages": [{"role": "user", "content": content}]}
    stub = upstream()

    @agent(name=f"anthropic_media_{block['type']}")
    async def body(ctx: AgentContext) -> None:
        stream = await anthropic_dropin(stub).messages.create(**ask, stream=True)
        async for _event in stream:
            break
        await stream.close()

    handle = run_to_rest(body)
    [done] = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert done["estimated"] and at_least <= done["total_tokens"] <= at_most


def test_an_abandoned_stream_counts_the_tool_arguments_that_arrived_as_output():
    arguments = json.dumps({"query": "x" * 8_000})

    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        from tests.fakes.anthropic_api import anthropic_message

        def event(name: str, **data: Any) -> bytes:
            return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

        block = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": arguments}
        message = {**anthropic_message(""), "content": [], "stop_reason": None}
        frames = [
            event("message_start", message=message),
            event("content_block_start", index=0, content_block=block),
            event("content_block_delta", index=0, delta=delta),
            event("content_block_delta", index=0, delta={**delta, "partial_json": ""}),
        ]
        return 200, {"content-type": "text/event-stream"}, frames

    stub = Upstream(ANTHROPIC_LIB, reply)

    @agent(name="anthropic_abandoned_tool_args")
    async def body(ctx: AgentContext) -> None:
        stream = await anthropic_dropin(stub).messages.create(**MSG, stream=True)
        seen = 0
        async for _event in stream:
            seen += 1
            if seen == 3:  # the arguments have arrived; stop before the reply ends
                break
        await stream.close()

    handle = run_to_rest(body)
    [done] = [e.payload for e in handle.events() if e.type == "llm:done"]
    # 8,000-odd bytes of arguments, at four a token; far above the call's 64-token output cap.
    assert done["estimated"] and done["output_tokens"] >= len(arguments) // 4
