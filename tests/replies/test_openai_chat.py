"""OpenAI chat's reply rules: when a stream ends, where usage is, which text the deltas spell."""

from __future__ import annotations

import json
from typing import Any

from pyrula.fingerprints import surfaces

from pyrula.replies import openai_chat, rules_for
from pyrula.transport.framing import SSEEvent
from tests.replies.support import ANSWER, by_name, completion, stream


def _event(data: str) -> SSEEvent:
    return SSEEvent("message", data)


def _ends(compared: dict[str, Any], meta: dict[str, Any], *chunks: str) -> list[bool]:
    finished = openai_chat.end(compared, meta)
    return [finished(_event(chunk)) for chunk in chunks]


def test_a_single_choice_ends_at_its_finish_reason_or_done():
    assert _ends({}, {}, '{"choices":[{"index":0,"delta":{}}]}') == [False]
    assert _ends({}, {}, '{"choices":[{"index":0,"finish_reason":"stop"}]}') == [True]
    assert _ends({}, {}, "[DONE]") == [True]


def test_n_choices_end_when_every_choice_finished():
    assert _ends(
        {"n": 2},
        {},
        '{"choices":[{"index":0,"finish_reason":"stop"}]}',
        '{"choices":[{"index":1,"finish_reason":"length"}]}',
    ) == [False, True]


def test_a_stream_that_asked_for_usage_ends_at_the_usage_chunk():
    meta = {"stream_options": {"include_usage": True}}
    assert openai_chat.wants_usage(meta) and not openai_chat.wants_usage({})
    assert _ends(
        {},
        meta,
        '{"choices":[{"index":0,"finish_reason":"stop"}]}',
        '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}',
    ) == [False, True]


def test_garbage_never_ends_a_stream_and_never_raises():
    assert _ends({}, {}, "", "{", "[1, 2]", '"stop"', "[" * 100_000) == [False] * 5


def test_usage_counts_cached_prompt_tokens_as_cache_reads():
    usage = openai_chat.usage(
        [
            {
                "model": "gpt-4o",
                "usage": {
                    "prompt_tokens": 100,
                    "completion_tokens": 20,
                    "prompt_tokens_details": {"cached_tokens": 60},
                },
            }
        ]
    )
    assert (usage.model, usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (
        "gpt-4o",
        40,
        60,
        20,
    )


def test_groq_usage_is_read_from_x_groq_and_deepseek_cache_hits_as_cache_reads():
    groq = by_name("groq")
    chunks = [_json(frame) for frame in stream(groq)]
    usage = openai_chat.usage(chunks)
    assert (usage.input_tokens, usage.output_tokens) == (41, len(ANSWER))
    deepseek = openai_chat.usage([completion(by_name("deepseek"))])
    assert (deepseek.input_tokens, deepseek.output_tokens, deepseek.cache_read_tokens) == (
        12,
        6,
        64,
    )


def test_text_deltas_join_per_choice():
    rule = rules_for(surfaces.OPENAI_CHAT).text
    assert rule is openai_chat.text
    data = {"choices": [{"index": 1, "delta": {"content": "b"}}, {"delta": {"content": "a"}}]}
    assert list(openai_chat.text("message", data)) == [(1, "b"), (0, "a")]
    assert list(openai_chat.text("message", {"choices": [{"delta": {"refusal": "no"}}]})) == []


def test_a_cut_stream_counts_its_text_once_even_where_together_repeats_it():
    together = by_name("together")
    chunks = [_json(frame) for frame in stream(together)[:3]]  # role chunk and two pieces
    assert openai_chat.RULES.arrived(chunks) == len("".join(ANSWER[:2]))


def test_tool_call_arguments_count_as_arrived_output():
    chunk = {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": '{"a": 1}'}}]}}]}
    assert openai_chat.RULES.arrived([chunk]) == len('{"a": 1}')


def _json(frame: bytes) -> Any:
    text = frame.decode().strip()
    return json.loads(text.removeprefix("data: ")) if text.startswith("data: {") else None


def test_a_groq_stream_that_asked_for_usage_ends_at_the_chunk_carrying_x_groq_usage():
    frames = stream(by_name("groq"))
    finished = openai_chat.end({}, {"stream_options": {"include_usage": True}})
    ends = [finished(_event(frame.decode().strip().removeprefix("data: "))) for frame in frames]
    assert ends.index(True) == len(frames) - 2  # the last chunk, before `[DONE]`
