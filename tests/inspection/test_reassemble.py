"""Streamed replies read back as text, one provider's event shapes at a time."""

from __future__ import annotations

import json
from typing import Any

from pyrula.inspection.reassemble import reassemble


def sse(*events: tuple[str | None, Any]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data)
        out.append(f"{head}data: {body}\n\n")
    return "".join(out).encode()


def test_openai_chat_joins_delta_content_per_choice() -> None:
    def chunk(index: int, content: str | None) -> dict[str, Any]:
        return {"choices": [{"index": index, "delta": {"content": content}}]}

    body = sse(
        (None, {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
        (None, chunk(0, "Hel")),
        (None, chunk(1, "Bon")),
        (None, chunk(0, "lo")),
        (None, chunk(1, "jour")),
        (None, {"choices": [], "usage": {"total_tokens": 3}}),
        (None, "[DONE]"),
    )

    result = reassemble("openai.chat", body)

    assert result.texts == {0: "Hello", 1: "Bonjour"}
    assert result.text == "[choice 0]\nHello\n[choice 1]\nBonjour"
    assert len(result.events) == 7


def test_openai_responses_joins_output_text_deltas_only() -> None:
    body = sse(
        ("response.created", {"type": "response.created", "response": {}}),
        ("response.reasoning_summary_text.delta", {"type": "x", "delta": "thinking"}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Hi "}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "there"}),
        ("response.output_text.done", {"type": "response.output_text.done", "text": "Hi there"}),
        ("response.completed", {"type": "response.completed", "response": {}}),
    )

    assert reassemble("openai.responses", body).text == "Hi there"


def test_anthropic_joins_text_deltas_and_skips_thinking_and_tool_json() -> None:
    def delta(kind: str, **fields: str) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": kind, **fields},
        }

    body = sse(
        ("message_start", {"type": "message_start", "message": {}}),
        delta("thinking_delta", thinking="hmm"),
        delta("text_delta", text="The answer"),
        delta("input_json_delta", partial_json='{"a":'),
        delta("text_delta", text=" is 4."),
        ("message_stop", {"type": "message_stop"}),
    )

    assert reassemble("anthropic.messages", body).text == "The answer is 4."
    assert reassemble("anthropic.beta.messages", body).text == "The answer is 4."


def test_gemini_joins_candidate_parts_without_thoughts() -> None:
    def chunk(*parts: dict[str, Any]) -> tuple[None, dict[str, Any]]:
        return None, {"candidates": [{"content": {"role": "model", "parts": list(parts)}}]}

    body = sse(
        chunk({"text": "plan", "thought": True}),
        chunk({"text": "Sun"}),
        chunk({"text": "ny."}, {"functionCall": {"name": "f"}}),
    )

    assert reassemble("gemini.generate", body).text == "Sunny."


def test_a_surface_without_a_rule_keeps_its_events_and_no_text() -> None:
    body = sse(("ping", "{}"), (None, {"anything": 1}))

    result = reassemble("generic", body)

    assert result.text is None
    assert [(e.event, e.data) for e in result.events] == [
        ("ping", "{}"),
        ("message", '{"anything": 1}'),
    ]


def test_malformed_events_are_skipped_not_fatal() -> None:
    body = (
        b"data: {not json\n\ndata: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": "ok"}}]}).encode()
        + b'\n\ndata: [1, 2]\n\ndata: {"choices": "nope"}'
    )

    assert reassemble("openai.chat", body).text == "ok"
