"""Shared pieces of the runtime tests: a scripted provider, a journaled OpenAI client, and
runs driven to rest on a fresh store."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import openai

from pyrula.journal.store import open_store
from pyrula.runtime import RunHandle, Worker, submit
from tests.fakes.clock import wait_until
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Reply, Upstream, json_reply

ROOT = Path(__file__).parents[2]


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


# The backend `new_store` opens: `each_backend` (tests/conftest.py) sets it per test.
BACKEND = {"name": "lmdb"}
OPENED: list[Any] = []


def new_store() -> Any:
    """A fresh, empty store on the current test's backend (closed by `each_backend`)."""
    if BACKEND["name"] == "postgresql":
        from tests.fakes.postgres import fresh_url  # psycopg: only the legs that test PostgreSQL

        store = open_store(fresh_url())
        OPENED.append(store)
        return store
    return open_store(tempfile.mkdtemp(prefix="pyrula-test-"))


def drive(store: Any) -> None:
    """Run every runnable run on `store` in this process until none is left."""
    asyncio.run(Worker(store, poll_seconds=0.005).run(until_idle=True))


def run_to_rest(workflow: Any, *args: Any, store: Any = None, **kwargs: Any) -> RunHandle:
    store = store or new_store()
    handle = submit(workflow, *args, store=store, **kwargs)
    drive(store)
    return handle


class WorkerProcess:
    """A real `pyrula worker` process; its stderr lines are collected as they are written."""

    def __init__(self, store: Path, *flags: str, module: str = "tests.runtime.worker_app"):
        command = [sys.executable, "-m", "pyrula.cli.app", "worker", "--import", module]
        self.process = subprocess.Popen(
            [*command, "--store", str(store), *flags],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._ended = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        with self.process.stderr as stream:  # closed at the worker's end: no descriptor leaks
            for line in stream:
                with self._changed:
                    self.lines.append(line.rstrip("\n"))
                    self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        with self._changed:
            return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """The first stderr line containing `text`, once the worker has written it.

        Lines name the store, whose path holds the test's name: pass a phrase of the message
        itself (`"draining: claiming no more runs"`), never a word a path can contain."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._ended or any(text in line for line in self.lines), timeout
            )
            found = [line for line in self.lines if text in line]
        assert found, f"the worker never wrote {text!r}; its stderr:\n{self.stderr}"
        return found[0]

    def send(self, signal_number: int) -> None:
        self.process.send_signal(signal_number)

    def exit_code(self, timeout: float = 120) -> int:
        """Wait for the worker to exit (and its stderr to be read to the end)."""
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def kill_worker_at(store_path: Path, effects: Path, step: int) -> None:
    """Start a real `pyrula worker` on `store_path` (`worker_app`) and SIGKILL it once `effects`
    shows it executing `step` (a step that hangs: `fast_steps`' FAST_HANG_AT)."""
    worker = WorkerProcess(store_path, "--lease-seconds", "30")
    try:
        wait_until(lambda: f"step {step}" in effects.read_text(), "the step that hangs")
        worker.send(signal.SIGKILL)
        worker.exit_code()
    finally:
        worker.kill()
