"""Shared pieces of the runtime tests: a scripted provider, a journaled OpenAI client, and
runs driven to rest on a fresh store."""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

import openai

from pyrula.journal.store import open_store
from pyrula.runtime import RunHandle, Worker, submit
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Reply, Upstream, json_reply


def chat_upstream(prefix: str = "answer to") -> Upstream:
    def reply(request: Any) -> Reply:
        question = json.loads(request.content)["messages"][-1]["content"]
        return json_reply(chat_completion(f"{prefix} {question}"))

    return Upstream(OPENAI_LIB, reply)


def async_openai(upstream: Upstream) -> openai.AsyncOpenAI:
    return openai_client(upstream, is_async=True, api_key="sk-unused", max_retries=0)


def sync_openai(upstream: Upstream) -> openai.OpenAI:
    return openai_client(upstream, api_key="sk-unused", max_retries=0)


async def ask(client: openai.AsyncOpenAI, question: str, **kw: Any) -> str:
    reply = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}], **kw
    )
    return reply.choices[0].message.content or ""


def new_store() -> Any:
    return open_store(tempfile.mkdtemp(prefix="pyrula-test-"))


def drive(store: Any) -> None:
    """Run every runnable run on `store` in this process until none is left."""
    asyncio.run(Worker(store, poll_seconds=0.005).run(until_idle=True))


def run_to_rest(workflow: Any, *args: Any, store: Any = None, **kwargs: Any) -> RunHandle:
    store = store or new_store()
    handle = submit(workflow, *args, store=store, **kwargs)
    drive(store)
    return handle
