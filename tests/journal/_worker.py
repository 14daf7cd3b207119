"""A recording process for the multi-process tests: imports only what it needs (start-up is the
cost of spawning)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import openai

import pyrula
from pyrula.journal import Store, pending
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Reply, Upstream, json_reply


def answer(request: Any) -> Reply:
    question = json.loads(request.content)["messages"][-1]["content"]
    return json_reply(chat_completion(f"answer to {question}", model="m", id="c", usage=None))


def client() -> openai.OpenAI:
    return openai_client(Upstream(OPENAI_LIB, answer), api_key="sk-unused")


def ask(sdk: openai.OpenAI, question: str) -> str | None:
    reply = sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content


def record(store_path: str, worker: int, calls: int) -> None:
    sdk = client()
    with pyrula.cassette("shared", mode="new_episodes", store=store_path):
        for i in range(calls):
            assert ask(sdk, f"w{worker}-q{i}") == f"answer to w{worker}-q{i}"


def record_then_hang(
    store_path: str,
    calls: int,
    recorded: Any,
    hang: Any,
    api_key: str,
    path: str | None = None,
    fold_every: int | None = None,
) -> None:
    """Record `calls` exchanges in one block (of a text cassette at `path`, if given), set
    `recorded`, and wait inside the block to be killed (so whatever the block had not yet put in
    the store is left pending, and its file is not written). `fold_every`: batches put in the
    store meanwhile."""
    pending.FOLD_SECONDS = 3600.0  # no timed fold while it waits: the test recovers the log
    if fold_every is not None:
        pending.FOLD_EVERY = fold_every
    sdk = openai_client(Upstream(OPENAI_LIB, answer), api_key=api_key)
    with pyrula.cassette("killed", mode="once", store=store_path, path=path):
        for i in range(calls):
            assert ask(sdk, f"q{i}") == f"answer to q{i}"
        recorded.set()
        hang.wait()


def kill_while_recording(
    store_path: Path,
    calls: int,
    api_key: str,
    path: Path | None = None,
    fold_every: int | None = None,
) -> None:
    """Record `calls` exchanges in a child process's block and SIGKILL it inside the block
    (`record_then_hang`): its pending log is left behind as a stopped process's."""
    Store(store_path).close()
    context = multiprocessing.get_context("spawn")
    recorded, hang = context.Event(), context.Event()  # `hang` is never set
    text = None if path is None else str(path)
    child = context.Process(
        target=record_then_hang,
        args=(str(store_path), calls, recorded, hang, api_key, text, fold_every),
    )
    child.start()
    try:
        assert recorded.wait(timeout=120), "the recording process did not record"
    finally:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
    assert child.exitcode == -signal.SIGKILL
