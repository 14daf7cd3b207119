"""A stand-in OpenAI (httpx2 MockTransport) and the real SDK calls that record stores from it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
from typer.testing import Result

import pyrula

SECRET = "sk-test-0123456789abcdefSECRETKEY"
STORY = "Once upon a time, a crab found a shell."
# Big enough that its frames spill past page 0 into the `frames` database.
LONG_CHUNKS = 400


@dataclass
class Provider:
    """A stand-in OpenAI: answers chat completions, streamed or not, and counts the calls."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    keys_seen: list[str] = field(default_factory=list)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.calls.append(body)
        auth = request.headers.get("authorization", "")
        self.keys_seen.append(auth)
        question = body["messages"][-1]["content"]
        if body.get("stream"):
            sse = _sse(_pieces(question))
            if question == "long":  # sent event by event: many frames, several pages
                events = [e + b"\n\n" for e in sse.split(b"\n\n") if e]
                return httpx2.Response(
                    200, headers={"content-type": "text/event-stream"}, content=iter(events)
                )
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)
        return httpx2.Response(
            200,
            json={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                # A careless provider echoing the caller's credentials back.
                "system_fingerprint": auth,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"Answer to {question}"},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )


def _pieces(question: str) -> list[str]:
    if question == "long":
        return [f"word{i:04d} " + "x" * 80 for i in range(LONG_CHUNKS)]
    words = STORY.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def _sse(pieces: list[str]) -> bytes:
    chunks = [
        {
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt-x",
            "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}],
        }
        for p in pieces
    ]
    chunks.append(
        {
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "gpt-x",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    events = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


def make_client(provider: Provider) -> openai.OpenAI:
    transport = pyrula.Httpx2Transport(httpx2.MockTransport(provider))
    return openai.OpenAI(
        api_key=SECRET,
        base_url="http://openai.test/v1",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )


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
