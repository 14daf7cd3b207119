"""Usage read the way each provider reports it, and prices found by canonical model id."""

from __future__ import annotations

import json

import pytest

from pyrula.runtime.metering import PriceTable, Usage, canonical_model, usage_from_reply


@pytest.mark.parametrize(
    ("model", "canonical"),
    [
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("claude-haiku-4-5@20251001", "claude-haiku-4-5"),
        ("openai.gpt-oss-120b-1:0", "gpt-oss-120b"),
        ("gemini-2.5-flash", "gemini-2.5-flash"),
    ],
)
def test_provider_prefixes_dates_and_versions_map_to_one_row(model, canonical):
    assert canonical_model(model) == canonical
    assert PriceTable().row(model) is not None


def test_rows_added_by_the_user_price_their_own_ids():
    table = PriceTable()
    assert table.row("my-azure-deployment") is None
    table.add("my-azure-deployment", input=1.0, output=2.0)
    cost = table.cost(Usage(model="my-azure-deployment", input_tokens=1000, output_tokens=500))
    assert cost == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)


def _sse(*events: dict) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def test_openai_chat_usage_counts_cached_tokens_as_cache_reads():
    body = json.dumps(
        {
            "model": "gpt-4o",
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "prompt_tokens_details": {"cached_tokens": 60},
            },
        }
    ).encode()
    usage = usage_from_reply("openai.chat", body, streamed=False)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (40, 60, 20)


def test_anthropic_stream_usage_is_message_start_then_cumulative_message_delta():
    body = _sse(
        {
            "type": "message_start",
            "message": {
                "model": "claude-haiku-4-5",
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 5,
                    "cache_creation_input_tokens": 7,
                    "output_tokens": 1,
                },
            },
        },
        {"type": "message_delta", "usage": {"output_tokens": 4}},
        {"type": "message_delta", "usage": {"output_tokens": 9}},
    )
    usage = usage_from_reply("anthropic.messages", body, streamed=True)
    assert usage == Usage("claude-haiku-4-5", 10, 9, 5, 7)


def test_gemini_usage_splits_cached_prompt_tokens_and_adds_thoughts_to_output():
    body = _sse(
        {
            "modelVersion": "gemini-2.5-flash",
            "usageMetadata": {
                "promptTokenCount": 50,
                "cachedContentTokenCount": 20,
                "candidatesTokenCount": 8,
                "thoughtsTokenCount": 4,
            },
        }
    )
    usage = usage_from_reply("gemini.generate", body, streamed=True)
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (30, 20, 12)


def test_responses_and_bedrock_usage():
    responses = json.dumps(
        {
            "model": "gpt-5",
            "usage": {
                "input_tokens": 9,
                "output_tokens": 2,
                "input_tokens_details": {"cached_tokens": 4},
            },
        }
    )
    assert usage_from_reply("openai.responses", responses.encode(), streamed=False) == Usage(
        "gpt-5", 5, 2, 4, 0
    )
    converse = json.dumps(
        {"usage": {"inputTokens": 7, "outputTokens": 3, "cacheReadInputTokens": 2}}
    )
    assert usage_from_reply("bedrock.converse", converse.encode(), streamed=False) == Usage(
        None, 7, 3, 2, 0
    )
