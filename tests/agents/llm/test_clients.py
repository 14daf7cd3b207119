"""The native model clients speak each provider's API: a turn's request on the wire, its tool
calls and usage decoded, a streamed turn's live deltas, the raw reply kept."""

from __future__ import annotations

import asyncio

import pytest

from pyrula.agents.llm import Message, TextDelta, ToolArgsDelta, ToolSpec
from tests.fakes.agent_api import PROVIDERS, calls, model_for, text, upstream
from tests.fakes.provider import TEST_KEY

LOOKUP = ToolSpec(
    "lookup",
    "Look a city up.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_turn_decodes_tool_calls_and_usage(provider, stream):
    stand_in = upstream(
        provider, [calls(("lookup", {"city": "Paris"}), ("lookup", {"city": "Oslo"}))]
    )
    model = model_for(provider, stand_in=stand_in)
    deltas = []
    reply = asyncio.run(
        model.complete(
            [Message.user("Where?")],
            instructions="Be brief.",
            tools=[LOOKUP],
            on_delta=deltas.append if stream else None,
        )
    )
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("lookup", {"city": "Paris"}),
        ("lookup", {"city": "Oslo"}),
    ]
    assert reply.usage.input_tokens == 10 and reply.usage.output_tokens == 5
    assert reply.raw is not None
    assert len(stand_in.calls) == 1
    if stream:
        pieces = "".join(d.arguments for d in deltas if isinstance(d, ToolArgsDelta))
        assert '"Paris"' in pieces and '"Oslo"' in pieces


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_text_reaches_the_handler_piece_by_piece(provider):
    stand_in = upstream(provider, [text("It is sunny")])
    deltas = []
    reply = asyncio.run(
        model_for(provider, stand_in=stand_in).complete(
            [Message.user("Weather?")], on_delta=deltas.append
        )
    )
    assert reply.text.strip() == "It is sunny"
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)).strip() == "It is sunny"


@pytest.mark.parametrize(
    ("provider", "header", "value"),
    [
        ("openai", "authorization", f"Bearer {TEST_KEY}"),
        ("anthropic", "x-api-key", TEST_KEY),
        ("gemini", "x-goog-api-key", TEST_KEY),
        ("bedrock", "authorization", f"Bearer {TEST_KEY}"),
    ],
)
def test_each_client_authenticates_as_its_provider_expects(provider, header, value):
    stand_in = upstream(provider, [text("ok")])
    asyncio.run(model_for(provider, stand_in=stand_in).complete([Message.user("hi")]))
    assert stand_in.headers_seen[0][header] == value


@pytest.mark.parametrize(
    ("provider", "path"),
    [
        ("openai", "/chat/completions"),
        ("anthropic", "/v1/messages"),
        ("gemini", "/v1beta/models/gemini-test:generateContent"),
        ("bedrock", "/model/anthropic.claude-test-v1:0/converse"),
    ],
)
def test_each_client_posts_to_its_providers_path(provider, path):
    stand_in = upstream(provider, [text("ok")])
    asyncio.run(model_for(provider, stand_in=stand_in).complete([Message.user("hi")]))
    assert stand_in.requests[0].url.path == path


def test_the_key_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    stand_in = upstream("openai", [text("ok")])
    model = model_for("openai", stand_in=stand_in, api_key=None)
    asyncio.run(model.complete([Message.user("hi")]))
    assert stand_in.headers_seen[0]["authorization"] == "Bearer sk-from-env"


def test_bedrock_signs_with_sigv4_from_aws_credentials(monkeypatch):
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAPYRULATEST000042")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "pyrula/secret+Key0123456789abcdefghijklmn")
    stand_in = upstream("bedrock", [text("ok")])
    model = model_for("bedrock", stand_in=stand_in, api_key=None, region="eu-west-1")
    asyncio.run(model.complete([Message.user("hi")]))
    auth = stand_in.headers_seen[0]["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIAPYRULATEST000042/")
    assert "/eu-west-1/bedrock/aws4_request" in auth


def test_a_provider_error_is_journaled_and_a_resume_raises_it_again_without_asking():
    import httpx2

    from pyrula.agents import agent
    from pyrula.agents.testing import AgentRunner
    from pyrula.runtime import RunStore, Worker, resume
    from tests.fakes.provider import Upstream, json_reply

    stand_in = Upstream(httpx2, lambda request: json_reply({"error": "bad model"}, 400), ())
    model = model_for("openai", stand_in=stand_in)

    @agent(name="native-error")
    async def asks(ctx) -> str:
        return (await model.complete([Message.user("hi")])).text

    runner = AgentRunner(asks)
    events = runner.run_sync()
    assert events[-1].payload["error"]["type"] == "ModelHTTPError"
    resume(runner.run_id, store=runner.store)
    asyncio.run(Worker(runner.store, poll_seconds=0.01).run(until_idle=True))
    record = RunStore(runner.store).get(runner.run_id)
    assert record.status == "failed" and record.attempt == 2
    assert "bad model" in record.error["message"]
    assert len(stand_in.calls) == 1


def test_a_client_closes_its_connections_as_each_asyncio_run_ends():
    """Two `asyncio.run`s in one process (a notebook, a worker loop then another): each loop's
    connection to the provider is closed as that loop ends, none left to the collector."""
    import gc
    import warnings

    from tests.fakes.server import Server, serving

    with Server(serving(upstream("openai", [text("one"), text("two")]).reply)) as server:
        model = model_for("openai", base_url=server.url)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            for question in ("First?", "Second?"):
                reply = asyncio.run(model.complete([Message.user(question)]))
                assert reply.text.strip()
            del model
            gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
