"""Recording live replies through the transport and replaying them, with the real SDKs."""

from __future__ import annotations

import asyncio

import pytest

import pyrula
from tests.fakes.anthropic_api import anthropic_client, anthropic_message, anthropic_sse
from tests.fakes.openai_api import chat_completion, chat_sse, openai_client
from tests.fakes.provider import ANTHROPIC_LIB, OPENAI_LIB, Upstream, ask, json_reply, sse_reply


def test_chat_completion_replays_identically_with_no_request(store_path):
    upstream = Upstream(OPENAI_LIB, lambda r: json_reply(chat_completion("Pong.")))
    client = openai_client(upstream)
    with pyrula.cassette("chat", store=store_path):
        live = client.chat.completions.create(model="gpt-test", messages=ask("Ping?"))
    with pyrula.cassette("chat", mode="none", store=store_path):
        replayed = client.chat.completions.create(model="gpt-test", messages=ask("Ping?"))
    assert len(upstream.calls) == 1
    assert replayed.model_dump() == live.model_dump()


def test_streamed_chat_replays_the_same_chunks(store_path):
    upstream = Upstream(OPENAI_LIB, lambda r: sse_reply(chat_sse("one two three")))
    client = openai_client(upstream)
    with pyrula.cassette("stream", store=store_path):
        live = [
            c.model_dump()
            for c in client.chat.completions.create(
                model="gpt-test", messages=ask("count"), stream=True
            )
        ]
    with pyrula.cassette("stream", mode="none", store=store_path):
        replayed = [
            c.model_dump()
            for c in client.chat.completions.create(
                model="gpt-test", messages=ask("count"), stream=True
            )
        ]
    assert len(upstream.calls) == 1
    assert replayed == live
    assert (
        "".join(c["choices"][0]["delta"].get("content") or "" for c in live if c["choices"])
        == "one two three "
    )


def test_async_anthropic_plain_and_streamed(store_path):
    def reply(request):
        import json

        body = json.loads(request.content)
        if body.get("stream"):
            return sse_reply(anthropic_sse("hello there"))
        return json_reply(anthropic_message("Hi."))

    upstream = Upstream(ANTHROPIC_LIB, reply)
    client = anthropic_client(upstream, is_async=True)

    async def calls():
        message = await client.messages.create(
            model="claude-test", max_tokens=10, messages=ask("hi")
        )
        events = [
            e.type
            async for e in await client.messages.create(
                model="claude-test", max_tokens=10, messages=ask("hi"), stream=True
            )
        ]
        return message.model_dump(), events

    with pyrula.cassette("anthropic", store=store_path):
        live = asyncio.run(calls())
    with pyrula.cassette("anthropic", mode="none", store=store_path):
        replayed = asyncio.run(calls())
    assert len(upstream.calls) == 2
    assert replayed == live
    assert live[1][-1] == "message_stop"


def test_repeated_identical_requests_get_their_own_replies_in_order(store_path):
    answers = iter(["first", "second", "third"])
    upstream = Upstream(OPENAI_LIB, lambda r: json_reply(chat_completion(next(answers))))
    client = openai_client(upstream)

    def three():
        return [
            client.chat.completions.create(model="m", messages=ask("same"))
            .choices[0]
            .message.content
            for _ in range(3)
        ]

    with pyrula.cassette("repeat", store=store_path):
        assert three() == ["first", "second", "third"]
    with pyrula.cassette("repeat", mode="none", store=store_path):
        assert three() == ["first", "second", "third"]
    assert len(upstream.calls) == 3


def test_sdk_retry_replays_as_the_sdk_saw_it(store_path):
    attempts = []

    def flaky(request):
        attempts.append(1)
        if len(attempts) == 1:
            return json_reply({"error": {"message": "overloaded", "type": "server_error"}}, 500)
        return json_reply(chat_completion("after retry"))

    upstream = Upstream(OPENAI_LIB, flaky)
    client = openai_client(upstream)
    with pyrula.cassette("retry", store=store_path):
        live = client.chat.completions.create(model="m", messages=ask("x"))
    with pyrula.cassette("retry", mode="none", store=store_path):
        replayed = client.chat.completions.create(model="m", messages=ask("x"))
    assert len(upstream.calls) == 2
    assert replayed.choices[0].message.content == live.choices[0].message.content == "after retry"


def test_provider_error_is_recorded_and_replayed_as_the_sdk_error(store_path):
    upstream = Upstream(
        OPENAI_LIB,
        lambda r: json_reply(
            {
                "error": {
                    "message": "no such model",
                    "type": "invalid_request_error",
                    "code": "model_not_found",
                }
            },
            404,
        ),
    )
    client = openai_client(upstream)
    import openai

    with pyrula.cassette("err", store=store_path), pytest.raises(openai.NotFoundError) as live:
        client.chat.completions.create(model="nope", messages=ask("x"))
    with (
        pyrula.cassette("err", mode="none", store=store_path),
        pytest.raises(openai.NotFoundError) as replayed,
    ):
        client.chat.completions.create(model="nope", messages=ask("x"))
    assert len(upstream.calls) == 1
    assert replayed.value.code == live.value.code == "model_not_found"


def test_changed_request_in_replay_only_mode_names_the_difference(store_path):
    upstream = Upstream(OPENAI_LIB, lambda r: json_reply(chat_completion("ok")))
    client = openai_client(upstream)
    history = [{"role": "system", "content": "be brief"}, *ask("one")]
    with pyrula.cassette("miss", store=store_path):
        client.chat.completions.create(model="m", messages=history)
    changed = [{"role": "system", "content": "be verbose"}, *ask("one")]
    with (
        pyrula.cassette("miss", mode="none", store=store_path),
        pytest.raises(pyrula.ReplayMiss) as miss,
    ):
        client.chat.completions.create(model="m", messages=changed)
    assert "messages[0].content" in str(miss.value)
    assert len(upstream.calls) == 1


def test_sampling_and_model_changes_still_replay(store_path):
    upstream = Upstream(OPENAI_LIB, lambda r: json_reply(chat_completion("ok")))
    client = openai_client(upstream)
    with pyrula.cassette("meta", store=store_path):
        client.chat.completions.create(model="m1", messages=ask("q"), temperature=0.1)
    with pyrula.cassette("meta", mode="none", store=store_path):
        reply = client.chat.completions.create(model="m2", messages=ask("q"), temperature=0.9)
    assert reply.choices[0].message.content == "ok"
    assert len(upstream.calls) == 1
