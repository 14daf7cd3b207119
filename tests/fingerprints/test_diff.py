from __future__ import annotations

from typing import Any

import pytest
from pyrula.fingerprints import canonicalize, diff, nearest

from tests.fingerprints.support import image_b64, post


def _tool(name: str, schema: dict[str, Any] | None = None, description: str = "") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema or {}},
    }


MESSAGES = [{"role": "user", "content": f"turn {i}"} for i in range(5)]
BASE: dict[str, Any] = {
    "system": "Be brief.",
    "messages": MESSAGES,
    "tools": [_tool("search"), _tool("lookup")],
    "stream": True,
}

CASES = [
    pytest.param(
        {"messages": [*MESSAGES[:4], {"role": "user", "content": "changed"}]},
        ['messages[4].content changed ("turn 4" -> "changed")'],
        id="message content",
    ),
    pytest.param(
        {"messages": [*MESSAGES, *MESSAGES[:2]]},
        ["messages: 2 more items (7 vs 5)"],
        id="more messages",
    ),
    pytest.param(
        {"messages": MESSAGES[:4]}, ["messages: 1 fewer item (4 vs 5)"], id="fewer messages"
    ),
    pytest.param(
        {"tools": [_tool("search", {"type": "object"}), _tool("lookup")]},
        ["tools: `search` schema changed"],
        id="tool schema",
    ),
    pytest.param(
        {"tools": [_tool("search", description="Find things."), _tool("lookup")]},
        ["tools: `search` description changed"],
        id="tool description",
    ),
    pytest.param(
        {"tools": [_tool("search"), _tool("lookup"), _tool("fetch")]},
        ["tools: `fetch` added"],
        id="tool added",
    ),
    pytest.param({"tools": [_tool("search")]}, ["tools: `lookup` removed"], id="tool removed"),
    pytest.param(
        {"tools": [_tool("lookup"), _tool("search")]}, ["tools: order changed"], id="tool order"
    ),
    pytest.param(
        {"system": "Be long."}, ['system changed ("Be brief." -> "Be long.")'], id="system"
    ),
    pytest.param({"stream": False}, ["stream changed (true -> false)"], id="stream"),
    pytest.param({"tool_choice": "auto"}, ["tool_choice added"], id="field added"),
    pytest.param({"system": None}, ['system changed ("Be brief." -> null)'], id="to null"),
    pytest.param(
        {"system": [{"type": "text", "text": "Be brief."}]},
        ["system changed (string -> list)"],
        id="type change",
    ),
]


@pytest.mark.parametrize(("change", "expected"), CASES)
def test_each_difference_is_named_by_its_path(change: dict[str, Any], expected: list[str]) -> None:
    assert diff(BASE, {**BASE, **change}) == expected


def test_identical_dicts_have_no_differences() -> None:
    assert diff(BASE, dict(reversed(list(BASE.items())))) == []


def test_a_removed_field_is_named() -> None:
    assert diff(BASE, {k: v for k, v in BASE.items() if k != "system"}) == ["system removed"]


def test_numbers_and_booleans_are_not_confused() -> None:
    assert diff({"n": 1}, {"n": True}) == ["n changed (1 -> true)"]


def test_long_values_are_truncated_and_encoded_data_is_never_shown() -> None:
    long_text = "word " * 40
    (line,) = diff({"system": "short"}, {"system": long_text})
    assert line.startswith('system changed ("short" -> "word word')
    assert len(line) < 120
    blob_a, blob_b = image_b64(1, 60), image_b64(2, 60)
    assert diff({"data": blob_a}, {"data": blob_b}) == ["data changed"]


def test_a_changed_image_reads_as_binary_without_its_bytes() -> None:
    url = "https://api.openai.com/v1/chat/completions"

    def compared(seed: int) -> dict[str, Any]:
        image = {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + image_b64(seed)},
        }
        return canonicalize(
            post(url, {"messages": [{"role": "user", "content": [image]}]})
        ).compared

    lines = diff(compared(1), compared(2))
    assert lines == ["messages[0].content[0].image_url.url changed (binary content differs)"]


@pytest.mark.parametrize(
    ("key", "tool", "renamed"),
    [
        pytest.param(
            "tools",
            {"name": "t", "input_schema": {}},
            {"name": "t", "input_schema": {"a": 1}},
            id="anthropic",
        ),
        pytest.param(
            "functionDeclarations",
            {"name": "t", "parameters": {}},
            {"name": "t", "parameters": {"a": 1}},
            id="gemini",
        ),
        pytest.param(
            "tools",
            {"toolSpec": {"name": "t", "inputSchema": {"json": {}}}},
            {"toolSpec": {"name": "t", "inputSchema": {"json": {"a": 1}}}},
            id="bedrock",
        ),
    ],
)
def test_tools_are_matched_by_name_for_every_provider(
    key: str, tool: dict[str, Any], renamed: dict[str, Any]
) -> None:
    other = (
        {"name": "other", "parameters": {}}
        if "toolSpec" not in tool
        else {"toolSpec": {"name": "other"}}
    )
    before = {"wrap": {key: [other, tool]}}
    after = {"wrap": {key: [renamed, other]}}
    assert diff(before, after) == [f"wrap.{key}: `t` schema changed"]


def test_nested_gemini_tool_lists_keep_their_path() -> None:
    before = {"tools": [{"functionDeclarations": [{"name": "a"}]}, {"googleSearch": {}}]}
    after = {
        "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}, {"googleSearch": {}}]
    }
    assert diff(before, after) == ["tools[0].functionDeclarations: `b` added"]


def test_many_differences_are_capped_with_a_count() -> None:
    before = {"messages": [{"content": str(i)} for i in range(40)]}
    after = {"messages": [{"content": str(i + 1)} for i in range(40)]}
    lines = diff(before, after)
    assert len(lines) == 25
    assert lines[-1] == "... and 16 more differences"


def test_nearest_picks_the_candidate_with_the_fewest_differences() -> None:
    far = {**BASE, "system": "x", "stream": False}
    close = {**BASE, "stream": False}
    found = nearest(BASE, [("far", far), ("close", close)])
    assert found == ("close", ["stream changed (false -> true)"])


def test_nearest_of_nothing_is_none() -> None:
    assert nearest(BASE, []) is None
