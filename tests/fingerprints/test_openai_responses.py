from __future__ import annotations

import uuid
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
)

URL = "https://api.openai.com/v1/responses"
WEATHER = {
    "type": "function",
    "name": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}
BASE: dict[str, Any] = {
    "model": "gpt-5",
    "instructions": "Answer in French.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
    ],
    "tools": [WEATHER],
    "text": {"format": {"type": "text"}, "verbosity": "low"},
    "prompt": {"id": "pmpt_1", "version": "3", "variables": {"city": "Paris"}},
    "previous_response_id": "resp_0",
    "reasoning": {"effort": "low"},
    "store": True,
    "prompt_cache_key": "agents-sdk:run:11111111-1111-1111-1111-111111111111",
}

Mutation = Callable[[dict[str, Any]], None]


def _with(**fields: Any) -> Mutation:
    return lambda body: body.update(fields)


def _nested(name: str, **fields: Any) -> Mutation:
    return lambda body: body[name].update(fields)


CHANGES_THE_CALL = [
    pytest.param(_with(input="Weather in Lyon?"), id="input"),
    pytest.param(lambda b: b["input"][2].update(output="Rainy"), id="tool output"),
    pytest.param(_with(instructions="Answer in German."), id="instructions"),
    pytest.param(_with(tools=[]), id="tools"),
    pytest.param(lambda b: b["tools"][0].update(strict=False), id="tool definition"),
    pytest.param(_with(tool_choice="required"), id="tool_choice"),
    pytest.param(_nested("text", format={"type": "json_object"}), id="text.format"),
    pytest.param(_with(previous_response_id="resp_9"), id="previous_response_id"),
    pytest.param(_nested("prompt", id="pmpt_2"), id="prompt id"),
    pytest.param(_nested("prompt", version="4"), id="prompt version"),
    pytest.param(_nested("prompt", variables={"city": "Lyon"}), id="prompt variables"),
    pytest.param(_with(stream=True), id="stream"),
    pytest.param(
        lambda b: b["input"][0]["content"].append(
            {"type": "input_image", "image_url": "data:image/png;base64," + image_b64(5)}
        ),
        id="image added",
    ),
]

KEEPS_THE_CALL = [
    pytest.param(_with(model="gpt-5-mini"), id="model"),
    pytest.param(_with(temperature=0.1, top_p=0.3), id="sampling"),
    pytest.param(_with(max_output_tokens=5), id="max_output_tokens"),
    pytest.param(_with(store=False), id="store"),
    pytest.param(_with(metadata={"k": "v"}), id="metadata"),
    pytest.param(_with(reasoning={"effort": "high", "summary": "auto"}), id="reasoning"),
    pytest.param(_with(include=["reasoning.encrypted_content"]), id="include"),
    pytest.param(_nested("text", verbosity="high"), id="text.verbosity"),
    pytest.param(_with(prompt_cache_key=f"agents-sdk:run:{uuid.uuid4()}"), id="prompt_cache_key"),
    pytest.param(_with(parallel_tool_calls=False), id="parallel_tool_calls"),
]


@pytest.mark.parametrize("mutate", CHANGES_THE_CALL)
def test_a_change_to_what_decides_the_reply_changes_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) != digest(post(URL, BASE))


@pytest.mark.parametrize("mutate", KEEPS_THE_CALL)
def test_a_change_outside_the_replay_check_keeps_the_digest(mutate: Mutation) -> None:
    assert digest_after(URL, BASE, mutate) == digest(post(URL, BASE))


def test_key_order_separators_and_headers_do_not_matter() -> None:
    expected = digest(post(URL, BASE))
    assert digest(post(URL, reordered(BASE))) == expected
    assert digest(post(URL, BASE, VOLATILE_HEADERS, separators=(", ", ": "))) == expected


def test_only_the_format_of_text_is_compared_and_the_rest_is_meta() -> None:
    canonical = canonicalize(post(URL, BASE))
    assert canonical.surface == "openai.responses"
    assert canonical.compared["text"] == {"format": {"type": "text"}}
    assert canonical.compared["prompt"] == BASE["prompt"]
    assert canonical.meta["text"] == {"verbosity": "low"}
    assert canonical.meta["prompt_cache_key"] == BASE["prompt_cache_key"]
    assert "prompt_cache_key" not in canonical.compared


def test_a_real_sdk_request_is_fingerprinted_as_responses() -> None:
    parts = capture(
        lambda http: openai_client(http).responses.create(
            model="gpt-5", input="Ping?", text={"format": {"type": "text"}, "verbosity": "low"}
        )
    )
    canonical = canonicalize(parts)
    assert canonical.surface == "openai.responses"
    assert canonical.compared == {
        "input": "Ping?",
        "text": {"format": {"type": "text"}},
        "stream": False,
    }
    assert canonical.meta == {"model": "gpt-5", "text": {"verbosity": "low"}}
    assert_no_secret(canonical, "sk-test-secret")


def test_sdk_runs_with_a_fresh_prompt_cache_key_share_a_digest() -> None:
    def run() -> str:
        key = f"agents-sdk:run:{uuid.uuid4()}"
        return digest(
            capture(
                lambda http: openai_client(http).responses.create(
                    model="gpt-5", input="Ping?", prompt_cache_key=key
                )
            )
        )

    assert run() == run()


def test_a_stored_prompt_without_input_is_still_a_responses_call() -> None:
    canonical = canonicalize(post(URL, {"prompt": {"id": "pmpt_1"}}))
    assert canonical.surface == "openai.responses"


def test_a_body_without_any_responses_field_is_compared_whole() -> None:
    # Another API's `/surveys/7/responses` must not be reduced to the few Responses fields.
    survey = "https://forms.example/surveys/7/responses"
    first, second = post(survey, {"answer": "yes"}), post(survey, {"answer": "no"})
    assert canonicalize(first).surface == "generic"
    assert digest(first) != digest(second)
