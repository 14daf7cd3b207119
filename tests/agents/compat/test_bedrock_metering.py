"""Metering Bedrock replies: converse `usage`, converse-stream's `metadata` event, Anthropic on
Bedrock's base64 chunks (its `amazon-bedrock-invocationMetrics` not counted twice), canonical
model ids, and a stream the reader stopped early metered once as an estimate."""

from __future__ import annotations

import json
from typing import Any

from pyrula.runtime.metering import Usage, canonical_model, prices, usage_from_reply
from tests.agents.compat.support import MESSAGES, Case, llm_done
from tests.fakes import bedrock_api as bs

_CACHED = {
    "inputTokens": 20,
    "outputTokens": 5,
    "totalTokens": 45,
    "cacheReadInputTokens": 12,
    "cacheWriteInputTokens": 8,
}


def test_converse_usage_counts_cache_reads_and_writes_as_cache_tokens():
    body = b"".join(bs.converse_reply(usage=_CACHED).frames)
    assert usage_from_reply("bedrock.converse", body, streamed=False) == Usage(None, 20, 5, 12, 8)


def test_converse_stream_usage_comes_from_the_metadata_event():
    frames = bs.converse_events(["a", "b"], metadata=False)
    frames.append(bs.event("metadata", {"usage": _CACHED, "metrics": {"latencyMs": 1}}))
    assert usage_from_reply("bedrock.converse", b"".join(frames), streamed=True) == Usage(
        None, 20, 5, 12, 8
    )


def test_anthropic_on_bedrock_chunks_are_read_and_invocation_metrics_ignored():
    metrics = {"inputTokenCount": 999, "outputTokenCount": 999}
    chunks = [
        bs.anthropic_chunk(
            {
                "type": "message_start",
                "message": {"model": "claude-haiku-4-5-20251001", "usage": {"input_tokens": 7}},
            }
        ),
        bs.anthropic_chunk({"type": "message_delta", "usage": {"output_tokens": 3}}),
        bs.anthropic_chunk({"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics}),
    ]
    usage = usage_from_reply("anthropic.messages", b"".join(chunks), streamed=True)
    assert (usage.model, usage.input_tokens, usage.output_tokens) == (
        "claude-haiku-4-5-20251001",
        7,
        3,
    )


def test_bedrock_model_ids_price_by_their_canonical_id():
    assert canonical_model(bs.MODEL_ID) == "claude-haiku-4-5"
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/" + bs.MODEL_ID
    assert canonical_model(profile) == "claude-haiku-4-5"
    assert prices.row(bs.MODEL_ID) == prices.row("claude-haiku-4-5") is not None


def test_a_journaled_call_is_priced_by_its_model_id():
    with bs.BedrockStub(bs.converse_reply()) as stub:
        case = Case(stub, "bedrock_metered_cost")
        handle = case.run(lambda c: c.converse(modelId=bs.MODEL_ID, messages=MESSAGES))
    [done] = llm_done(handle)
    expected = prices.cost(Usage(None, 11, 4), "claude-haiku-4-5")
    assert done["cost_usd"] == expected and expected


def test_a_stream_the_reader_closed_early_is_metered_once_as_an_estimate():
    frames = bs.converse_events(["a", "b", "c"])

    def two_events_then_close(client: Any) -> list[Any]:
        reply = client.converse_stream(
            modelId=bs.MODEL_ID, messages=MESSAGES, inferenceConfig={"maxTokens": 50}
        )
        stream = reply["stream"]
        seen = [next(iter(stream)), next(iter(stream))]
        stream.close()
        return seen

    with bs.BedrockStub(bs.stream_answer(frames), bs.stream_answer(frames)) as stub:
        case = Case(stub, "bedrock_abandoned_stream")
        handle = case.run(two_events_then_close)
    assert case.sent == [1, 1]  # not journaled: a resume asks again
    dones = llm_done(handle)
    assert len(dones) == 2 and all(d["estimated"] for d in dones)
    assert all(d["position"] is None and d["abandoned_at"] for d in dones)
    request_bytes = len(json.dumps({"messages": MESSAGES}))
    assert all(d["total_tokens"] >= request_bytes // 4 for d in dones)
