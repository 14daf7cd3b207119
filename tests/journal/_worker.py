"""A recording process for the multi-process tests: imports only what it needs (start-up is the
cost of spawning)."""

from __future__ import annotations

import json

import httpx
import httpx2
import openai

import pyrula

LIB = httpx2 if int(openai.__version__.split(".")[0]) >= 3 else httpx


def answer(request: object) -> object:
    question = json.loads(request.content)["messages"][-1]["content"]  # type: ignore[attr-defined]
    return LIB.Response(
        200,
        json={
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"answer to {question}"},
                }
            ],
        },
    )


def client() -> openai.OpenAI:
    transport = (pyrula.Httpx2Transport if LIB is httpx2 else pyrula.HttpxTransport)(
        LIB.MockTransport(answer)
    )
    return openai.OpenAI(
        api_key="sk-unused",
        base_url="http://openai.test/v1",
        http_client=LIB.Client(transport=transport),
    )


def ask(sdk: openai.OpenAI, question: str) -> str | None:
    reply = sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content


def record(store_path: str, worker: int, calls: int) -> None:
    sdk = client()
    with pyrula.cassette("shared", mode="new_episodes", store=store_path):
        for i in range(calls):
            assert ask(sdk, f"w{worker}-q{i}") == f"answer to w{worker}-q{i}"
