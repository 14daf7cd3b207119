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

API = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:{method}"
URL = API.format(method="generateContent")
STREAM_URL = API.format(method="streamGenerateContent") + "?alt=sse"
VERTEX = (
    "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1"
    "/publishers/google/models/gemini-2.5-flash:generateContent"
)
PDF = image_b64(9, 120)  # short: a digest must stand in whatever the length
BASE: dict[str, Any] = {
    "contents": [
        {
            "role": "user",
            "parts": [
                {"text": "Summarise this."},
                {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
            ],
        }
    ],
    "systemInstruction": {"parts": [{"text": "Be brief."}]},
    "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    "generationConfig": {
        "temperature": 0.3,
        "topP": 0.9,
        "candidateCount": 1,
        "seed": 5,
        "thinkingConfig": {"thinkingBudget": 0},
        "responseMimeType": "application/json",
        "responseSchema": {"type": "OBJECT", "properties": {"summary": {"type": "STRING"}}},
    },
    "safetySettings": [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
}

Mutation = Callable[[dict[str, Any]], None]


def _with(**fields: Any) -> Mutation:
    return lambda body: body.update(fields)


def _config(**fields: Any) -> Mutation:
    return lambda body: body["generationConfig"].update(fields)


CHANGES_THE_CALL = [
    pytest.param(
        lambda b: b["contents"][0]["parts"][0].update(text="Translate this."), id="contents"
    ),
    pytest.param(
        lambda b: b["contents"][0]["parts"][1]["inlineData"].update(data=image_b64(8, 120)),
        id="inline bytes",
    ),
    pytest.param(_with(systemInstruction={"parts": [{"text": "Be long."}]}), id="system"),
    pytest.param(_with(tools=[{"googleSearch": {}}]), id="tools"),
    pytest.param(_with(toolConfig={"functionCallingConfig": {"mode": "ANY"}}), id="toolConfig"),
    pytest.param(_with(cachedContent="cachedContents/abc"), id="cachedContent"),
    pytest.param(_config(responseSchema={"type": "STRING"}), id="responseSchema"),
    pytest.param(_config(responseJsonSchema={"type": "string"}), id="responseJsonSchema"),
    pytest.param(_config(responseMimeType="text/plain"), id="responseMimeType"),
]

KEEPS_THE_CALL = [
    pytest.param(_config(temperature=1.0, topP=0.1), id="sampling"),
    pytest.param(_config(thinkingConfig={"thinkingBudget": 1024}), id="thinkingConfig"),
    pytest.param(_config(candidateCount=2), id="candidateCount"),
    pytest.param(_config(seed=6), id="seed"),
    pytest.param(_config(maxOutputTokens=10), id="maxOutputTokens"),
    pytest.param(_with(safetySettings=[]), id="safetySettings"),
    pytest.param(_with(labels={"team": "x"}), id="labels"),
]


@pytest.mark.parametrize("mutate", CHANGES_THE_CALL)
def test_a_change_to_what_decides_the_reply_changes_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) != digest(post(URL, BASE))


@pytest.mark.parametrize("mutate", KEEPS_THE_CALL)
def test_sampling_thinking_and_safety_keep_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) == digest(post(URL, BASE))


def test_genai_separators_key_order_and_headers_do_not_matter() -> None:
    genai_style = post(URL, reordered(BASE), VOLATILE_HEADERS, separators=(", ", ": "))
    assert digest(genai_style) == digest(post(URL, BASE))


def test_snake_case_field_names_fingerprint_like_camel_case() -> None:
    snake = {
        "contents": BASE["contents"],
        "system_instruction": BASE["systemInstruction"],
        "tools": BASE["tools"],
        "tool_config": BASE["toolConfig"],
        "generation_config": {
            "response_mime_type": "application/json",
            "response_schema": BASE["generationConfig"]["responseSchema"],
        },
    }
    assert digest(post(URL, snake)) == digest(post(URL, BASE))


def test_the_api_key_and_alt_query_are_ignored_and_never_stored() -> None:
    canonical = canonicalize(post(URL + "?key=AIza-secret", BASE))
    assert canonical.digest == digest(post(URL, BASE))
    assert "query" not in canonical.meta
    assert_no_secret(canonical, "AIza-secret", "AIza-other")


def test_stream_generate_content_is_a_streamed_call() -> None:
    streamed = canonicalize(post(STREAM_URL + "&key=AIza-secret", BASE))
    assert streamed.surface == "gemini.generate"
    assert streamed.stream is True
    assert streamed.digest != digest(post(URL, BASE))
    assert_no_secret(streamed, "AIza-secret")


def test_model_comes_from_the_path_and_sampling_goes_to_meta() -> None:
    canonical = canonicalize(post(VERTEX, BASE))
    assert canonical.surface == "gemini.generate"
    assert canonical.meta["model"] == "gemini-2.5-flash"
    assert canonical.meta["generationConfig"]["temperature"] == 0.3
    assert canonical.compared["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseSchema": BASE["generationConfig"]["responseSchema"],
    }
    assert canonical.digest == digest(post(URL, BASE))


def test_inline_bytes_are_a_digest_whatever_their_length() -> None:
    canonical = canonicalize(post(URL, BASE))
    data = canonical.compared["contents"][0]["parts"][1]["inlineData"]["data"]
    assert data["$digest"].startswith("sha256:")
    assert_no_secret(canonical, PDF)


@pytest.mark.parametrize("name", ["maxOutputTokens", "max_output_tokens"])
def test_the_output_limit_is_kept_where_the_spend_caps_read_it(name: str) -> None:
    body = {**BASE, "generationConfig": {**BASE["generationConfig"], name: 77}}
    canonical = canonicalize(post(URL, body))
    assert canonical.meta["max_output_tokens"] == 77
    assert canonical.digest == digest(post(URL, BASE))  # a sampling limit: not compared


def test_a_continuation_hop_is_another_request():
    def continued(body: dict[str, Any]) -> None:
        body["continuationToken"] = "cmVzdW1lLWhlcmU="

    assert digest_after(URL, BASE, continued) != digest_after(URL, BASE, lambda body: None)
