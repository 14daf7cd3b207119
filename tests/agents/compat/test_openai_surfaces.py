"""Each row of the OpenAI drop-in's surface table, held to what it promises inside a run."""

from __future__ import annotations

from typing import Any

import pytest

from pyrula.agents.compat._openai_surfaces import OPENAI, SURFACES
from tests.agents.compat.support import (  # noqa: F401
    CHAT,
    RESP,
    Answer,
    arrives_later,
    assert_unavailable,
    check_row,
    invoke,
    openai_dropin,
)
from tests.fakes.openai_api import upstream

# The spec's table, typed out independently of `_surfaces.SURFACES`.
EXPECTED = {
    "chat.completions.create": "journaled",
    "chat.completions.parse": "journaled",
    "chat.completions.stream": "journaled",
    "responses.create": "journaled",
    "responses.parse": "journaled",
    "responses.stream": "journaled",
    "embeddings": "passed through",
    "files": "passed through",
    "models": "passed through",
    "responses.delete": "passed through",
    "responses.input_items": "passed through",
    "responses.input_tokens": "passed through",
    "beta.assistants": "passed through",
    "chat.completions.list": "passed through",
    "chat.completions.retrieve": "passed through",
    "chat.completions.update": "passed through",
    "chat.completions.delete": "passed through",
    "chat.completions.messages": "passed through",
    "completions": "refused",
    "audio": "refused",
    "images": "refused",
    "videos": "refused",
    "realtime": "refused",
    "beta.chat": "refused",
    "beta.realtime": "refused",
    "beta.threads": "refused",
    "responses.retrieve": "refused",
    "responses.cancel": "refused",
    "responses.compact": "refused",
    "responses.connect": "refused",
    "with_raw_response": "refused",
    "with_streaming_response": "refused",
    "chat.with_raw_response": "refused",
    "chat.with_streaming_response": "refused",
    "chat.completions.with_raw_response": "refused",
    "chat.completions.with_streaming_response": "refused",
    "responses.with_raw_response": "refused",
    "responses.with_streaming_response": "refused",
    "beta.with_raw_response": "refused",
    "beta.with_streaming_response": "refused",
}


# A concrete call for each row: (the dotted call after `client.`, its keyword arguments).
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat.completions.create": ("chat.completions.create", CHAT),
    "chat.completions.parse": ("chat.completions.parse", {**CHAT, "response_format": Answer}),
    "chat.completions.stream": ("chat.completions.stream", CHAT),
    "responses.create": ("responses.create", RESP),
    "responses.parse": ("responses.parse", {**RESP, "text_format": Answer}),
    "responses.stream": ("responses.stream", RESP),
    "embeddings": ("embeddings.create", {"model": "text-embedding-3-small", "input": "x"}),
    "files": ("files.list", {}),
    "models": ("models.list", {}),
    "responses.delete": ("responses.delete", {"response_id": "resp_1"}),
    "responses.input_items": ("responses.input_items.list", {"response_id": "resp_1"}),
    "responses.input_tokens": ("responses.input_tokens.count", RESP),
    "beta.assistants": ("beta.assistants.list", {}),
    "chat.completions.list": ("chat.completions.list", {}),
    "chat.completions.retrieve": ("chat.completions.retrieve", {"completion_id": "c1"}),
    "chat.completions.update": (
        "chat.completions.update",
        {"completion_id": "c1", "metadata": {"k": "v"}},
    ),
    "chat.completions.delete": ("chat.completions.delete", {"completion_id": "c1"}),
    "chat.completions.messages": ("chat.completions.messages.list", {"completion_id": "c1"}),
    "completions": ("completions.create", {"model": "gpt-3.5-turbo-instruct", "prompt": "x"}),
    "audio": ("audio.speech.create", {"model": "tts-1", "voice": "alloy", "input": "x"}),
    "images": ("images.generate", {"prompt": "x"}),
    "videos": ("videos.create", {"prompt": "x"}),
    "realtime": ("realtime.client_secrets.create", {}),
    "beta.chat": ("beta.chat.completions.parse", CHAT),
    "beta.realtime": ("beta.realtime.sessions.create", {}),
    "beta.threads": ("beta.threads.create", {}),
    "responses.retrieve": ("responses.retrieve", {"response_id": "resp_1"}),
    "responses.cancel": ("responses.cancel", {"response_id": "resp_1"}),
    "responses.compact": ("responses.compact", {"model": "gpt-6-luna"}),
    "responses.connect": ("responses.connect", {}),
    "with_raw_response": ("with_raw_response.chat.completions.create", CHAT),
    "with_streaming_response": ("with_streaming_response.responses.create", RESP),
    "chat.with_raw_response": ("chat.with_raw_response.completions.create", CHAT),
    "chat.with_streaming_response": ("chat.with_streaming_response.completions.create", CHAT),
    "chat.completions.with_raw_response": ("chat.completions.with_raw_response.create", CHAT),
    "chat.completions.with_streaming_response": (
        "chat.completions.with_streaming_response.create",
        CHAT,
    ),
    "responses.with_raw_response": ("responses.with_raw_response.create", RESP),
    "responses.with_streaming_response": ("responses.with_streaming_response.create", RESP),
    "beta.with_raw_response": ("beta.with_raw_response.assistants.list", {}),
    "beta.with_streaming_response": ("beta.with_streaming_response.assistants.list", {}),
}

ROWS = sorted(set(EXPECTED) | {row.path for row in SURFACES})


def test_the_table_is_the_spec_table():
    assert {row.path: row.verdict.value for row in SURFACES} == EXPECTED
    assert set(CALLS) == set(EXPECTED)


@pytest.mark.parametrize("path", ROWS)
def test_surface_row_in_a_run(path):
    verdict = EXPECTED[path]
    assert OPENAI.classify(path).verdict.value == verdict
    stub = upstream()
    since = arrives_later(OPENAI, path)
    if since:  # the installed openai predates this surface: the drop-in names the release
        assert_unavailable(openai_dropin(stub), CALLS[path][0], since)
        return
    after = {**CHAT, "model": "gpt-after"}
    follow_up = ("chat.completions.create", after, "POST /chat/completions")
    check_row(verdict, path, CALLS[path], lambda: openai_dropin(stub), stub.seen, follow_up)
