"""Bedrock's reply rules: ConverseStream's last event, its usage, and unwrapping invoke chunks."""

from __future__ import annotations

import base64
import json

from pyrula.replies import bedrock_converse
from pyrula.transport.eventstream import EventStreamDecoder, encode_message


def _message(event_type: str, payload: object, message_type: str = "event") -> bytes:
    headers = {":message-type": message_type, ":event-type": event_type}
    if message_type == "exception":
        headers = {":message-type": "exception", ":exception-type": event_type}
    return encode_message(headers, json.dumps(payload).encode())


def _decoded(*frames: bytes):  # type: ignore[no-untyped-def]
    return EventStreamDecoder().feed(b"".join(frames))


def test_converse_stream_ends_at_metadata_or_an_exception():
    messages = _decoded(
        _message("messageStop", {"stopReason": "end_turn"}),
        _message("metadata", {"usage": {}}),
        _message("throttlingException", {"message": "slow down"}, "exception"),
    )
    assert [bedrock_converse.finished(m) for m in messages] == [False, True, True]


def test_an_invoke_chunk_is_unwrapped_and_invocation_metrics_left_out():
    inner = {"type": "message_stop", "amazon-bedrock-invocationMetrics": {"inputTokenCount": 9}}
    wrapped = {"bytes": base64.b64encode(json.dumps(inner).encode()).decode()}
    [message] = _decoded(_message("chunk", wrapped))
    assert bedrock_converse.chunk_document(message) == inner
    assert bedrock_converse.document(message) == {"type": "message_stop"}


def test_a_chunk_that_is_not_base64_json_is_not_a_document():
    [message] = _decoded(_message("chunk", {"bytes": "not base64!"}))
    assert bedrock_converse.chunk_document(message) is None


def test_usage_counts_cache_reads_and_writes():
    usage = bedrock_converse.usage(
        [
            {
                "usage": {
                    "inputTokens": 20,
                    "outputTokens": 5,
                    "cacheReadInputTokens": 12,
                    "cacheWriteInputTokens": 8,
                }
            }
        ]
    )
    assert (usage.input_tokens, usage.output_tokens) == (20, 5)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (12, 8)


def test_text_and_tool_input_deltas_count_as_arrived_output():
    deltas = [
        {"contentBlockDelta": {"delta": {"text": "abc"}}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"a"'}}}},
    ]
    assert bedrock_converse.RULES.arrived(deltas) == 7
