"""A worker process dies (SIGKILL) right after a journaled converse call; the worker that resumes
the run replays the call from the journal and Bedrock is not asked again.

Run as `python -m tests.agents.compat.test_bedrock_crash STORE` this module is that worker process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyrula.agents import AgentContext, agent
from pyrula.agents.compat.bedrock import journaled_bedrock
from pyrula.journal.store import open_store
from pyrula.runtime import Worker, submit
from tests.fakes import bedrock_api as bs

ROOT = Path(__file__).parents[3]


class _Endpoint:
    """What `bs.client` reads of a stub: the worker process only knows its URL."""

    def __init__(self, url: str) -> None:
        self.url = url


@agent(name="bedrock_crash")
async def ask_then_die(ctx: AgentContext, url: str, marker: str) -> str:
    client = journaled_bedrock(bs.client(_Endpoint(url)))  # type: ignore[arg-type]
    reply = await ctx.to_thread(
        client.converse,
        modelId=bs.MODEL_ID,
        messages=[{"role": "user", "content": [{"text": "Ping?"}]}],
    )
    if not os.path.exists(marker):
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)  # after the call was journaled, before the run ends
    return str(reply["output"]["message"]["content"][0]["text"])


@pytest.mark.slow
def test_a_restarted_worker_replays_converse_without_asking_again(tmp_path):
    store_path = tmp_path / "store"
    marker = tmp_path / "died"
    with bs.BedrockStub(bs.converse_reply("Pong.")) as stub:
        store = open_store(store_path)
        handle = submit(ask_then_die, stub.url, str(marker), store=store)
        worker = subprocess.run(
            [sys.executable, "-m", "tests.agents.compat.test_bedrock_crash", str(store_path)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            timeout=120,
        )
        assert worker.returncode == -signal.SIGKILL, worker.stderr.decode()[-2000:]
        assert marker.exists() and stub.count() == 1
        # The dead worker's lease is released once its process is seen gone: resume here.
        deadline = time.monotonic() + 30
        while handle.record.status != "completed" and time.monotonic() < deadline:
            asyncio.run(Worker(store, poll_seconds=0.005).run(until_idle=True))
        assert handle.record.status == "completed", handle.events()[-1].payload
        assert handle.record.result == "Pong."
        assert stub.count() == 1  # replayed from the journal, nothing sent
    done = [e for e in handle.events() if e.type == "llm:done"]
    assert len(done) == 1


if __name__ == "__main__":
    asyncio.run(Worker(sys.argv[1], poll_seconds=0.005).run(until_idle=True))
