"""OpenAI Responses' reply rules: terminal events, usage of the last response, output deltas."""

from __future__ import annotations

import pytest

from pyrula.replies import openai_responses
from pyrula.transport.framing import SSEEvent


@pytest.mark.parametrize(
    ("event", "data", "ends"),
    [
        ("response.completed", "{}", True),
        ("response.incomplete", "{}", True),
        ("response.failed", "{}", True),
        ("error", "{}", True),
        ("message", '{"type": "response.completed"}', True),
        ("response.output_text.delta", '{"delta": "hi"}', False),
        ("message", "not json", False),
    ],
)
def test_a_stream_ends_at_a_terminal_event_named_or_typed(event, data, ends):
    assert openai_responses.RULES.sse_end is not None
    _end = openai_responses.RULES.sse_end({}, {})
    assert _end(SSEEvent(event, data)) is ends


def test_usage_of_the_completed_response_with_cached_input_as_cache_reads():
    usage = openai_responses.usage(
        [
            {"type": "response.created", "response": {"model": "gpt-5", "usage": None}},
            {
                "type": "response.completed",
                "response": {
                    "model": "gpt-5",
                    "status": "completed",
                    "usage": {
                        "input_tokens": 50,
                        "output_tokens": 7,
                        "input_tokens_details": {"cached_tokens": 30},
                    },
                },
            },
        ]
    )
    assert (usage.model, usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (
        "gpt-5",
        20,
        30,
        7,
    )
    assert usage.error is None


def test_a_failed_response_is_metered_with_its_error():
    failed = openai_responses.usage([{"type": "response.failed", "response": {"status": "failed"}}])
    assert failed.error == "response.failed"
    assert openai_responses.usage([{"type": "error", "message": "boom"}]).error == "error"


def test_only_output_text_deltas_are_text():
    text = openai_responses.text
    assert list(text("response.output_text.delta", {"delta": "a"})) == [(0, "a")]
    assert list(text("message", {"type": "response.output_text.delta", "delta": "b"})) == [(0, "b")]
    assert list(text("response.function_call_arguments.delta", {"delta": "{}"})) == []


def test_done_events_repeat_what_the_deltas_already_counted():
    events = [
        {"type": "response.output_text.delta", "delta": "abcd"},
        {"type": "response.function_call_arguments.delta", "delta": "{}"},
        {"type": "response.output_text.done", "text": "abcd"},
    ]
    assert openai_responses.RULES.arrived(events) == 6
