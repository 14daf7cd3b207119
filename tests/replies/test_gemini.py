"""Gemini's reply rules: a stream has no end marker, only finished candidates."""

from __future__ import annotations

import json

from pyrula.replies import gemini
from pyrula.transport.framing import SSEEvent


def _finished(doc: object) -> bool:
    return gemini.finished(SSEEvent("message", json.dumps(doc)))


def test_a_chunk_ends_the_stream_when_every_candidate_finished():
    assert _finished({"candidates": [{"finishReason": "STOP"}]})
    assert not _finished({"candidates": [{"finishReason": "STOP"}, {"content": {}}]})
    assert not _finished({"candidates": []}) and not _finished({"usageMetadata": {}})


def test_usage_splits_cached_prompt_tokens_and_bills_thoughts_as_output():
    usage = gemini.usage(
        [
            {
                "modelVersion": "gemini-2.5-flash",
                "usageMetadata": {
                    "promptTokenCount": 100,
                    "toolUsePromptTokenCount": 5,
                    "cachedContentTokenCount": 40,
                    "candidatesTokenCount": 10,
                    "thoughtsTokenCount": 3,
                },
            }
        ]
    )
    assert usage.model == "gemini-2.5-flash"
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (65, 40, 13)


def test_text_leaves_thoughts_out_and_keeps_candidates_apart():
    data = {
        "candidates": [
            {"content": {"parts": [{"text": "think", "thought": True}, {"text": "a"}]}},
            {"index": 1, "content": {"parts": [{"text": "b"}]}},
        ]
    }
    assert list(gemini.text("message", data)) == [(0, "a"), (1, "b")]


def test_function_call_arguments_count_serialised():
    call = {"candidates": [{"content": {"parts": [{"functionCall": {"args": {"q": 1}}}]}}]}
    assert gemini.RULES.arrived([call]) == len(json.dumps({"q": 1}))
    assert gemini.RULES.model_fields == ("modelVersion",)
