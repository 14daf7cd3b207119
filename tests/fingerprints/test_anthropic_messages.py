from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from pyrula.fingerprints import canonicalize

from tests.fingerprints.support import (
    VOLATILE_HEADERS,
    anthropic_client,
    assert_no_secret,
    capture_anthropic,
    digest,
    digest_after,
    image_b64,
    post,
    reordered,
    with_headers,
)

URL = "https://api.anthropic.com/v1/messages"
BEDROCK = "https://bedrock-runtime.us-east-1.amazonaws.com/model/{model}/{op}"
VERTEX = (
    "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5"
    "/publishers/anthropic/models/{model}:{op}"
)
GET_WEATHER = {
    "name": "get_weather",
    "description": "Current weather.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": image_b64(3)},
}
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "What is this?"}, IMAGE]},
]
BASE: dict[str, Any] = {
    "model": "claude-test-1",
    "max_tokens": 1024,
    "system": "You are terse.",
    "messages": MESSAGES,
    "tools": [GET_WEATHER],
}

Mutation = Callable[[dict[str, Any]], None]


def _with(**fields: Any) -> Mutation:
    return lambda body: body.update(fields)


CHANGES_THE_CALL = [
    pytest.param(_with(system="You are chatty."), id="system prompt"),
    pytest.param(_with(system=[{"type": "text", "text": "You are terse."}]), id="system form"),
    pytest.param(
        lambda b: b["messages"][0]["content"][0].update(text="And this?"), id="message content"
    ),
    pytest.param(
        lambda b: b["messages"][0]["content"][1]["source"].update(data=image_b64(4)),
        id="image bytes",
    ),
    pytest.param(_with(tools=[]), id="tool list"),
    pytest.param(
        lambda b: b["tools"][0]["input_schema"]["properties"].update(days={"type": "integer"}),
        id="tool schema",
    ),
    pytest.param(_with(tool_choice={"type": "any"}), id="tool_choice"),
    pytest.param(_with(output_config={"effort": "low"}), id="output_config"),
    pytest.param(_with(container="container_1"), id="container"),
    pytest.param(_with(stream=True), id="stream"),
    pytest.param(_with(thread={"type": "continue", "id": "thr_1"}), id="thread"),
    pytest.param(_with(compaction={"trigger": 1000}), id="compaction"),
]

KEEPS_THE_CALL = [
    pytest.param(_with(model="claude-haiku-4-5"), id="model"),
    pytest.param(_with(max_tokens=5), id="max_tokens"),
    pytest.param(_with(temperature=0.0, top_p=0.9, top_k=5), id="sampling"),
    pytest.param(_with(thinking={"type": "enabled", "budget_tokens": 2048}), id="thinking"),
    pytest.param(_with(metadata={"user_id": "u-1"}), id="metadata"),
    pytest.param(_with(stop_sequences=["END"]), id="stop_sequences"),
    pytest.param(_with(tool_choice=None), id="null tool_choice is unset"),
]


@pytest.mark.parametrize("mutate", CHANGES_THE_CALL)
def test_a_change_to_what_decides_the_reply_changes_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) != digest(post(URL, BASE))


@pytest.mark.parametrize("mutate", KEEPS_THE_CALL)
def test_model_sampling_thinking_and_metadata_keep_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) == digest(post(URL, BASE))


def test_key_order_separators_and_volatile_headers_do_not_matter() -> None:
    expected = digest(post(URL, BASE))
    assert digest(post(URL, reordered(BASE), separators=(", ", ": "))) == expected
    assert digest(post(URL, BASE, VOLATILE_HEADERS)) == expected


BETA_CHANGES = [
    pytest.param({"anthropic-beta": "files-api-2025-04-14"}, {}, id="beta list"),
    pytest.param({}, {"output_format": {"type": "json_schema", "schema": {}}}, id="output_format"),
    pytest.param({}, {"context_management": {"edits": []}}, id="context_management"),
    pytest.param({}, {"fallbacks": [{"model": "claude-haiku-4-5"}]}, id="fallbacks"),
    pytest.param({}, {"thread": {"type": "create"}}, id="thread"),
]


@pytest.mark.parametrize(("headers", "fields"), BETA_CHANGES)
def test_a_beta_call_is_also_compared_on_its_beta_fields(
    headers: dict[str, str], fields: dict[str, Any]
) -> None:
    beta = {"anthropic-beta": "context-management-2025-06-27,interleaved-thinking-2025-05-14"}
    changed = {"anthropic-beta": beta["anthropic-beta"] + "," + headers.get("anthropic-beta", "")}
    assert digest(post(URL, {**BASE, **fields}, changed)) != digest(post(URL, BASE, beta))


def test_beta_order_spacing_and_duplicates_do_not_matter() -> None:
    first = post(URL, BASE, {"anthropic-beta": "b-one,b-two"})
    second = post(URL, BASE, {"anthropic-beta": " b-two , b-one,b-two"})
    assert canonicalize(first).compared["betas"] == ["b-one", "b-two"]
    assert digest(first) == digest(second)


def test_beta_query_or_header_makes_the_beta_surface() -> None:
    assert canonicalize(post(URL, BASE)).surface == "anthropic.messages"
    assert canonicalize(post(URL + "?beta=true", BASE)).surface == "anthropic.beta.messages"
    with_header = post(URL, BASE, {"anthropic-beta": "x"})
    assert canonicalize(with_header).surface == "anthropic.beta.messages"


def test_real_sdk_messages_and_beta_messages_requests() -> None:
    plain = capture_anthropic(
        lambda http: anthropic_client(http).messages.create(
            model="claude-test-1", max_tokens=10, system="sys", messages=MESSAGES
        )
    )
    canonical = canonicalize(plain)
    assert canonical.surface == "anthropic.messages"
    assert set(canonical.compared) == {"system", "messages", "stream"}
    assert canonical.meta == {"model": "claude-test-1", "max_tokens": 10}
    assert_no_secret(canonical, "sk-ant-test-secret", image_b64(3))

    def beta(betas: list[str]) -> Any:
        return capture_anthropic(
            lambda http: anthropic_client(http).beta.messages.create(
                model="claude-test-1", max_tokens=10, messages=MESSAGES, betas=betas
            )
        )

    first, second = canonicalize(beta(["b2", "b1"])), canonicalize(beta(["b1", "b2"]))
    assert first.surface == "anthropic.beta.messages"
    assert first.compared["betas"] == ["b1", "b2"]
    assert first.digest == second.digest


def test_an_anthropic_version_header_change_keeps_the_digest() -> None:
    parts = capture_anthropic(
        lambda http: anthropic_client(http).messages.create(
            model="claude-test-1", max_tokens=10, messages=MESSAGES
        )
    )
    older = with_headers(parts, {"anthropic-version": "2023-06-01", "x-stainless-retry-count": "1"})
    assert digest(parts) == digest(older)


def _cloud_capture(client: Callable[[httpx2.Client], Any], stream: bool, **kwargs: Any) -> Any:
    def call(http: httpx2.Client) -> object:
        return client(http).messages.create(
            model=kwargs.pop("model"), max_tokens=10, messages=MESSAGES, stream=stream, **kwargs
        )

    return capture_anthropic(call)


def _bedrock(http: httpx2.Client) -> anthropic.AnthropicBedrock:
    return anthropic.AnthropicBedrock(
        api_key="bedrock-secret", aws_region="us-east-1", http_client=http
    )


def _vertex(http: httpx2.Client) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(
        access_token="vertex-secret", region="us-east5", project_id="p", http_client=http
    )


@pytest.mark.parametrize("stream", [False, True])
def test_bedrock_invoke_from_the_sdk_takes_model_and_stream_from_the_url(stream: bool) -> None:
    model = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    canonical = canonicalize(_cloud_capture(_bedrock, stream, model=model))
    assert canonical.surface == "anthropic.messages"
    assert canonical.meta["model"] == model
    assert canonical.meta["platform"] == "bedrock"
    assert canonical.stream is stream and canonical.compared["stream"] is stream
    assert "anthropic_version" in canonical.meta
    assert_no_secret(canonical, "bedrock-secret")


@pytest.mark.parametrize("stream", [False, True])
def test_vertex_raw_predict_from_the_sdk_takes_model_and_stream_from_the_url(stream: bool) -> None:
    canonical = canonicalize(_cloud_capture(_vertex, stream, model="claude-haiku-4-5@20251001"))
    assert canonical.surface == "anthropic.messages"
    assert canonical.meta["model"] == "claude-haiku-4-5@20251001"
    assert canonical.meta["platform"] == "vertex"
    assert canonical.stream is stream
    assert_no_secret(canonical, "vertex-secret")


def test_the_same_call_on_anthropic_bedrock_and_vertex_shares_a_digest() -> None:
    # Like a base URL, the platform and its model id are not part of the call.
    body = {"max_tokens": 10, "messages": MESSAGES}
    direct = post(URL, {**body, "model": "claude-haiku-4-5", "stream": True})
    on_bedrock = post(
        BEDROCK.format(
            model="anthropic.claude-haiku-4-5-20251001-v1%3A0", op="invoke-with-response-stream"
        ),
        {**body, "anthropic_version": "bedrock-2023-05-31"},
    )
    on_vertex = post(
        VERTEX.format(model="claude-haiku-4-5@20251001", op="streamRawPredict"),
        {**body, "anthropic_version": "vertex-2023-10-16", "stream": True},
    )
    assert digest(direct) == digest(on_bedrock) == digest(on_vertex)


def test_bedrock_betas_in_the_body_make_a_beta_call() -> None:
    url = BEDROCK.format(model="anthropic.claude-x", op="invoke")
    body = {**BASE, "anthropic_version": "bedrock-2023-05-31", "anthropic_beta": ["b2", "b1"]}
    canonical = canonicalize(post(url, body))
    assert canonical.surface == "anthropic.beta.messages"
    assert canonical.compared["betas"] == ["b1", "b2"]
    assert "anthropic_beta" not in canonical.meta


def test_bedrock_invoke_for_another_vendor_is_generic() -> None:
    url = BEDROCK.format(model="mistral.mistral-large-2407-v1%3A0", op="invoke")
    canonical = canonicalize(post(url, {"messages": [{"role": "user", "content": "hi"}]}))
    assert canonical.surface == "generic"


def test_vertex_count_tokens_is_not_a_generation() -> None:
    url = VERTEX.format(model="count-tokens", op="rawPredict")
    assert canonicalize(post(url, BASE)).surface == "generic"
