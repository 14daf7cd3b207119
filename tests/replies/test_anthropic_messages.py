"""Anthropic Messages' reply rules, over SSE and over Bedrock's event-stream chunks."""

from __future__ import annotations

import base64
import json

from pyrula.fingerprints import surfaces

from pyrula.replies import anthropic_messages, rules_for
from pyrula.transport.eventstream import EventStreamDecoder, encode_message
from pyrula.transport.framing import SSEEvent


def _chunk(event: dict[str, object]) -> bytes:
    payload = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()})
    headers = {":message-type": "event", ":event-type": "chunk"}
    return encode_message(headers, payload.encode())


def test_plain_and_beta_messages_share_one_set_of_rules():
    plain = rules_for(surfaces.ANTHROPIC_MESSAGES)
    beta = rules_for(surfaces.ANTHROPIC_BETA_MESSAGES)
    assert plain.usage is beta.usage is anthropic_messages.usage
    assert plain.text is beta.text is anthropic_messages.text


def test_an_sse_stream_ends_at_message_stop_or_error():
    finished = anthropic_messages.finished
    assert finished(SSEEvent("message_stop", "{}"))
    assert finished(SSEEvent("error", "{}"))
    assert not finished(SSEEvent("message_delta", '{"type": "message_delta"}'))


def test_on_bedrock_the_stream_ends_at_the_chunk_that_carries_message_stop():
    messages = EventStreamDecoder().feed(
        _chunk({"type": "message_delta"}) + _chunk({"type": "message_stop"})
    )
    assert [anthropic_messages.finished_on_bedrock(m) for m in messages] == [False, True]


def test_usage_is_message_start_then_the_cumulative_message_delta():
    usage = anthropic_messages.usage(
        [
            {
                "type": "message_start",
                "message": {
                    "model": "claude-haiku-4-5",
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 4,
                        "cache_creation_input_tokens": 2,
                        "output_tokens": 1,
                    },
                },
            },
            {"type": "message_delta", "usage": {"output_tokens": 9}},
        ]
    )
    assert usage.model == "claude-haiku-4-5"
    assert (usage.input_tokens, usage.output_tokens) == (10, 9)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (4, 2)


def test_text_is_text_deltas_only():
    text = anthropic_messages.text
    delta = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}}
    thinking = {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "x"}}
    assert list(text("content_block_delta", delta)) == [(0, "hi")]
    assert list(text("content_block_delta", thinking)) == []


def test_text_and_tool_input_json_count_as_arrived_output():
    events = [
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "abc"}},
        {"type": "content_block_delta", "delta": {"partial_json": '{"q"'}},
    ]
    assert anthropic_messages.RULES.arrived(events) == 7
