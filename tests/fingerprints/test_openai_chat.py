from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyrula.fingerprints import canonicalize

from tests.fingerprints.support import (
    VOLATILE_HEADERS,
    assert_no_secret,
    capture,
    digest,
    digest_after,
    image_b64,
    openai_client,
    post,
    reordered,
    with_headers,
)

URL = "https://api.openai.com/v1/chat/completions"
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}
LOOKUP = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}
BASE: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this image?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64," + image_b64(1)},
                },
            ],
        },
    ],
    "tools": [SEARCH, LOOKUP],
    "temperature": 0.2,
    "max_tokens": 100,
}

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    """A mutation setting one field; `path` is dotted, with list indexes as numbers."""

    def mutate(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = body
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


def _drop(name: str) -> Mutation:
    return lambda body: body.pop(name)


def _image(seed: int) -> str:
    return "data:image/png;base64," + image_b64(seed)


CHANGES_THE_CALL = [
    pytest.param(_set("messages.0.content", "Be verbose."), id="system prompt"),
    pytest.param(_set("messages.1.content.0.text", "What is this?"), id="message content"),
    pytest.param(_set("messages.1.content.1.image_url.url", _image(2)), id="image bytes"),
    pytest.param(
        lambda b: b["messages"].append({"role": "assistant", "content": "A cat."}),
        id="one more message",
    ),
    pytest.param(_set("tools", [SEARCH]), id="tool removed"),
    pytest.param(
        _set("tools.0.function.parameters.properties.q.type", "integer"), id="tool schema"
    ),
    pytest.param(_set("tools.0.function.description", "Search."), id="tool description"),
    pytest.param(_set("functions", [{"name": "legacy", "parameters": {}}]), id="legacy functions"),
    pytest.param(_set("tool_choice", "required"), id="tool_choice"),
    pytest.param(_set("response_format", {"type": "json_object"}), id="response_format"),
    pytest.param(_set("stream", True), id="stream"),
    pytest.param(_set("n", 2), id="n"),
    pytest.param(_set("prediction", {"type": "content", "content": "x"}), id="prediction"),
    pytest.param(_set("modalities", ["text", "audio"]), id="modalities"),
    pytest.param(_set("audio", {"voice": "alloy", "format": "wav"}), id="audio"),
]

KEEPS_THE_CALL = [
    pytest.param(_set("model", "gpt-4o-mini"), id="model"),
    pytest.param(_set("temperature", 1.5), id="temperature"),
    pytest.param(_drop("temperature"), id="temperature omitted"),
    pytest.param(_set("max_tokens", 9), id="max_tokens"),
    pytest.param(_set("max_completion_tokens", 9), id="max_completion_tokens"),
    pytest.param(_set("top_p", 0.5), id="top_p"),
    pytest.param(_set("seed", 7), id="seed"),
    pytest.param(_set("user", "u-1"), id="user"),
    pytest.param(_set("metadata", {"run": "r-1"}), id="metadata"),
    pytest.param(_set("store", True), id="store"),
    pytest.param(_set("reasoning_effort", "high"), id="reasoning_effort"),
    pytest.param(_set("stream_options", {"include_usage": True}), id="stream_options"),
    pytest.param(_set("n", 1), id="n=1 is the default"),
    pytest.param(_set("tool_choice", None), id="tool_choice null is unset"),
    pytest.param(_set("stream", False), id="stream false is the default"),
]


@pytest.mark.parametrize("mutate", CHANGES_THE_CALL)
def test_a_change_to_what_decides_the_reply_changes_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) != digest(post(URL, BASE))


@pytest.mark.parametrize("mutate", KEEPS_THE_CALL)
def test_model_sampling_and_bookkeeping_do_not_change_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) == digest(post(URL, BASE))


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(post(URL, reordered(BASE)), id="key order"),
        pytest.param(post(URL, BASE, separators=(", ", ": ")), id="separators"),
        pytest.param(post(URL, BASE, VOLATILE_HEADERS), id="volatile headers"),
        pytest.param(post("http://localhost:4000/chat/completions", BASE), id="base url"),
    ],
)
def test_wire_details_do_not_change_the_digest(variant: Any) -> None:
    assert digest(variant) == digest(post(URL, BASE))


def test_a_real_sdk_request_is_compared_on_messages_and_tools_only() -> None:
    parts = capture(
        lambda http: openai_client(http).chat.completions.create(
            model="gpt-4o", messages=BASE["messages"], tools=BASE["tools"], temperature=0.2
        )
    )
    canonical = canonicalize(parts)
    assert canonical.surface == "openai.chat"
    assert set(canonical.compared) == {"messages", "tools", "stream"}
    assert canonical.meta == {"model": "gpt-4o", "temperature": 0.2}
    assert canonical.stream is False
    assert_no_secret(canonical, "sk-test-secret", image_b64(1))


def test_sdk_calls_differing_in_model_sampling_and_retry_headers_share_a_digest() -> None:
    first = capture(
        lambda http: openai_client(http).chat.completions.create(
            model="gpt-4o", messages=BASE["messages"], temperature=0.2, max_tokens=10
        )
    )
    second = capture(
        lambda http: openai_client(http).chat.completions.create(
            model="gpt-4.1", messages=BASE["messages"], seed=3, max_completion_tokens=99
        )
    )
    retried = with_headers(second, {"x-stainless-retry-count": "2", "user-agent": "x"})
    assert digest(first) == digest(second) == digest(retried)


def test_sdk_stream_and_non_stream_calls_differ() -> None:
    def call(stream: bool) -> Any:
        return lambda http: openai_client(http).chat.completions.create(
            model="gpt-4o", messages=BASE["messages"], stream=stream
        )

    streamed, plain = canonicalize(capture(call(True))), canonicalize(capture(call(False)))
    assert streamed.stream and not plain.stream
    assert streamed.digest != plain.digest


def test_an_azure_deployment_is_chat_with_deployment_and_api_version_in_meta() -> None:
    url = "https://res.openai.azure.com/openai/deployments/prod-4o/chat/completions"
    canonical = canonicalize(post(url + "?api-version=2025-01-01&api-key=secret", BASE))
    assert canonical.surface == "openai.chat"
    assert canonical.meta["deployment"] == "prod-4o"
    assert canonical.meta["query"] == {"api-version": "2025-01-01"}
    assert canonical.digest == digest(post(URL, BASE))
    assert_no_secret(canonical, "secret")


def test_an_inline_image_is_compared_by_digest_and_never_stored() -> None:
    canonical = canonicalize(post(URL, BASE))
    stored = canonical.compared["messages"][1]["content"][1]["image_url"]["url"]
    assert stored["$digest"].startswith("sha256:")
    assert stored["$data_url"] == "data:image/png;base64"
    assert_no_secret(canonical, image_b64(1)[:200])
