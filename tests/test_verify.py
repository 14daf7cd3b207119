"""`verify` mode on streams: one result per call, compared by the structure a stream reassembles
to, through the real SDKs — no false mismatch when only the chunking, the pings or the terminal
`[DONE]` differ, and a real change of shape still reported."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

import pyrula
from pyrula.verify import compare_replies
from tests.fakes import anthropic_api, gemini_api, openai_api
from tests.fakes.provider import ANTHROPIC_LIB, OPENAI_LIB, Upstream, ask, sse_reply


def _switching(first: list[bytes], then: list[bytes], lib: Any) -> Upstream:
    """A stand-in that streams `first` on its first call and `then` on every later one."""
    replies = iter([first])
    return Upstream(lib, lambda request: sse_reply(next(replies, then)))


def _record_then_verify(store_path: Any, name: str, call: Callable[[], str]) -> pyrula.Cassette:
    with pyrula.cassette(name, store=store_path):
        call()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pyrula.VerifyMismatch)
        with pyrula.cassette(name, mode="verify", store=store_path) as verified:
            call()
    return verified


def _openai_stream(client: Any) -> Callable[[], str]:
    def call() -> str:
        stream = client.chat.completions.create(model="m", messages=ask("q"), stream=True)
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    return call


def test_an_openai_chat_stream_verifies_once_with_no_false_mismatch(store_path):
    # Recorded in three chunks with its `[DONE]`; live in one chunk, with a usage chunk.
    first = openai_api.chat_sse("one two three", usage=True)
    then = openai_api.chat_chunks(
        ["one two three"], role=True, usage=openai_api.STREAM_USAGE, model="gpt-test"
    )
    client = openai_api.openai_client(_switching(first, then, OPENAI_LIB))
    verified = _record_then_verify(store_path, "oa", _openai_stream(client))
    assert [r.matches for r in verified.verify_report] == [True]


def test_an_anthropic_stream_with_pings_verifies_once_with_no_false_mismatch(store_path):
    ping = b'event: ping\ndata: {"type": "ping"}\n\n'
    first = anthropic_api.anthropic_sse("one two three")
    then = [first[0], ping, *anthropic_api.anthropic_sse("one")[1:]]
    client = anthropic_api.anthropic_client(_switching(first, then, ANTHROPIC_LIB))

    def call() -> str:
        with client.messages.stream(model="m", max_tokens=5, messages=ask("q")) as stream:
            return "".join(stream.text_stream)

    verified = _record_then_verify(store_path, "an", call)
    assert [r.matches for r in verified.verify_report] == [True]


def test_a_gemini_stream_verifies_once_with_no_false_mismatch(store_path):
    first = gemini_api.sse(gemini_api.stream_chunks("one two three"))
    then = gemini_api.sse(gemini_api.stream_chunks("one"))
    stub = _switching(first, then, gemini_api.GENAI_LIB)
    client = gemini_api.make_client(stub)

    def call() -> str:
        chunks = client.models.generate_content_stream(model=gemini_api.MODEL, contents="q")
        return "".join(c.text or "" for c in chunks)

    verified = _record_then_verify(store_path, "ge", call)
    assert [r.matches for r in verified.verify_report] == [True]


def test_a_stream_whose_events_changed_shape_is_still_reported_once(store_path):
    first = openai_api.chat_sse("one two")
    moved = [
        frame.replace(b'"finish_reason"', b'"logprobs": null, "finish_reason"')
        for frame in openai_api.chat_sse("one two")
    ]
    client = openai_api.openai_client(_switching(first, moved, OPENAI_LIB))
    call = _openai_stream(client)
    with pyrula.cassette("moved", store=store_path):
        call()
    with (
        pytest.warns(pyrula.VerifyMismatch, match=r"new field <?.*logprobs"),
        pyrula.cassette("moved", mode="verify", store=store_path) as verified,
    ):
        call()
    (result,) = verified.verify_report
    assert result.added == ["choices[].logprobs:null"]


def test_a_bedrock_event_stream_compares_by_its_events():
    recorded = b"".join(anthropic_api.bedrock_stream("one two three"))
    live = b"".join(anthropic_api.bedrock_stream("one"))
    same = compare_replies("bedrock.converse", 200, recorded, 200, live, streamed=True)
    assert same.matches and same.removed == [] and same.added == []
    cut = b"".join(anthropic_api.bedrock_stream("one", stop=False))
    changed = compare_replies("bedrock.converse", 200, recorded, 200, cut, streamed=True)
    assert not changed.matches and changed.removed
