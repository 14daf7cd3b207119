"""A stand-in OpenAI (httpx2 MockTransport) and the real SDK calls that record stores from it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import openai
from typer.testing import Result

from tests.fakes.openai_api import (
    SMALL_USAGE,
    SSE_HEADERS,
    chat_chunks,
    chat_completion,
    openai_client,
)
from tests.fakes.provider import Reply, Upstream, json_reply

SECRET = "sk-test-0123456789abcdefSECRETKEY"
STORY = "Once upon a time, a crab found a shell."
# Big enough that its frames spill past page 0 into the `frames` database.
LONG_CHUNKS = 400


def _answer(request: Any) -> Reply:
    body = json.loads(request.content)
    question = body["messages"][-1]["content"]
    if body.get("stream"):
        frames = chat_chunks(_pieces(question), id="chatcmpl-2", model="gpt-x")
        if question == "long":  # sent event by event: many frames, several pages
            return 200, SSE_HEADERS, frames
        return 200, SSE_HEADERS, [b"".join(frames)]
    # A careless provider echoing the caller's credentials back.
    auth = request.headers.get("authorization", "")
    text = f"Answer to {question}"
    reply = chat_completion(text, model=body["model"], usage=SMALL_USAGE, system_fingerprint=auth)
    return json_reply(reply)


class Provider(Upstream):
    """A stand-in OpenAI: answers chat completions, streamed or not, and logs the calls."""

    def __init__(self) -> None:
        super().__init__(httpx2, _answer)

    @property
    def keys_seen(self) -> list[str]:
        return [headers.get("authorization", "") for headers in self.headers_seen]


def _pieces(question: str) -> list[str]:
    if question == "long":
        return [f"word{i:04d} " + "x" * 80 for i in range(LONG_CHUNKS)]
    words = STORY.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def make_client(provider: Provider) -> openai.OpenAI:
    return openai_client(provider, api_key=SECRET, max_retries=0)


def ask(client: openai.OpenAI, question: str, *, model: str = "gpt-x") -> str:
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}]
    )
    return reply.choices[0].message.content or ""


def ask_streamed(client: openai.OpenAI, question: str) -> str:
    stream = client.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": question}], stream=True
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


Invoke = Callable[..., Result]
