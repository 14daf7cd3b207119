from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyrula.fingerprints import canonicalize

from tests.fingerprints.support import (
    VOLATILE_HEADERS,
    assert_no_secret,
    digest,
    digest_after,
    image_b64,
    post,
    reordered,
)

HOST = "https://bedrock-runtime.us-east-1.amazonaws.com"
MODEL_ID = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-pro-v1:0"
# botocore percent-encodes the model id into one path segment.
QUOTED_ID = MODEL_ID.replace(":", "%3A").replace("/", "%2F")
URL = f"{HOST}/model/{QUOTED_ID}/converse"
PHOTO = image_b64(7, 90)
BASE: dict[str, Any] = {
    "messages": [
        {
            "role": "user",
            "content": [
                {"text": "Describe it."},
                {"image": {"format": "png", "source": {"bytes": PHOTO}}},
            ],
        }
    ],
    "system": [{"text": "Be brief."}],
    "toolConfig": {
        "tools": [
            {
                "toolSpec": {
                    "name": "lookup",
                    "inputSchema": {"json": {"type": "object", "properties": {}}},
                }
            }
        ]
    },
    "inferenceConfig": {"maxTokens": 100, "temperature": 0.5},
}

Mutation = Callable[[dict[str, Any]], None]


def _with(**fields: Any) -> Mutation:
    return lambda body: body.update(fields)


CHANGES_THE_CALL = [
    pytest.param(
        lambda b: b["messages"][0]["content"][0].update(text="Name it."), id="message text"
    ),
    pytest.param(
        lambda b: b["messages"][0]["content"][1]["image"]["source"].update(bytes=image_b64(6, 90)),
        id="image bytes",
    ),
    pytest.param(_with(system=[{"text": "Be long."}]), id="system"),
    pytest.param(
        lambda b: b["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"].update(
            required=["q"]
        ),
        id="tool schema",
    ),
    pytest.param(_with(outputConfig={"textFormat": {"type": "json"}}), id="outputConfig"),
    pytest.param(_with(promptVariables={"city": {"text": "Paris"}}), id="promptVariables"),
    pytest.param(
        _with(guardrailConfig={"guardrailIdentifier": "g", "guardrailVersion": "1"}),
        id="guardrailConfig",
    ),
]

KEEPS_THE_CALL = [
    pytest.param(_with(inferenceConfig={"maxTokens": 5, "topP": 0.1}), id="inferenceConfig"),
    pytest.param(
        _with(additionalModelRequestFields={"top_k": 3}), id="additionalModelRequestFields"
    ),
    pytest.param(
        _with(additionalModelResponseFieldPaths=["/stop_sequence"]),
        id="additionalModelResponseFieldPaths",
    ),
    pytest.param(_with(requestMetadata={"team": "a"}), id="requestMetadata"),
    pytest.param(_with(serviceTier={"type": "priority"}), id="serviceTier"),
    pytest.param(_with(performanceConfig={"latency": "optimized"}), id="performanceConfig"),
]


@pytest.mark.parametrize("mutate", CHANGES_THE_CALL)
def test_a_change_to_what_decides_the_reply_changes_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) != digest(post(URL, BASE))


@pytest.mark.parametrize("mutate", KEEPS_THE_CALL)
def test_a_change_outside_the_replay_check_keeps_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) == digest(post(URL, BASE))


def test_model_id_is_decoded_into_meta_and_not_compared() -> None:
    canonical = canonicalize(post(URL, BASE))
    assert canonical.surface == "bedrock.converse"
    assert canonical.meta["modelId"] == MODEL_ID
    other_model = f"{HOST}/model/amazon.nova-lite-v1%3A0/converse"
    assert canonical.digest == digest(post(other_model, BASE))


def test_sigv4_headers_key_order_and_separators_do_not_matter() -> None:
    signed = post(URL, reordered(BASE), VOLATILE_HEADERS, separators=(", ", ": "))
    assert digest(signed) == digest(post(URL, BASE))
    assert_no_secret(canonicalize(signed), "FwoGZXIvYXdzE-other")


def test_converse_stream_is_a_streamed_call() -> None:
    streamed = canonicalize(post(URL.replace("/converse", "/converse-stream"), BASE))
    assert streamed.surface == "bedrock.converse"
    assert streamed.stream is True
    assert streamed.digest != digest(post(URL, BASE))


def test_image_bytes_are_a_digest_whatever_their_length() -> None:
    canonical = canonicalize(post(URL, BASE))
    source = canonical.compared["messages"][0]["content"][1]["image"]["source"]
    assert source["bytes"]["$digest"].startswith("sha256:")
    assert_no_secret(canonical, PHOTO)
