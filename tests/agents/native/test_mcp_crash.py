"""A worker running an agent with an MCP stdio server is SIGKILLed after the MCP tool finished;
with the server gone, a new worker completes the run from the journal."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from tests.agents.native.support import Zygote
from tests.fakes.agent_api import calls, scripted, text
from tests.fakes.server import Seen, Server, serving

pytest.importorskip("mcp")

SERVER = Path(__file__).with_name("mcp_server.py")


@pytest.mark.slow
def test_killed_after_the_mcp_tool_and_resumed_with_the_server_gone(tmp_path):
    effects = tmp_path / "effects.log"  # the MCP server's own log of forecast calls
    effects.touch()
    script = tmp_path / "server.py"
    shutil.copy(SERVER, script)
    os.environ["MCP_EFFECTS"] = str(effects)  # inherited by the zygote, its workers, the server
    answer = serving(scripted("openai", [calls(("forecast", {"city": "Oslo"})), text("Snow")]))
    gate = threading.Event()
    turns: list[int] = []

    def reply(seen: Seen):  # the second turn waits until the first worker is dead
        turns.append(len([m for m in seen.json()["messages"] if m["role"] == "assistant"]))
        if turns[-1] >= 1:
            gate.wait(30)
        return answer(seen)

    store_path = tmp_path / "store"
    store = Store(store_path)
    journal = RunStore(store)
    handle = submit("mcp-crash", "Weather in Oslo?", store=store)
    zygote = Zygote(tmp_path / "tools.log")
    try:
        with Server(reply) as server:
            pid = zygote.ask(f"fork mcp {store_path} {server.url}/v1 {script}")
            deadline = time.monotonic() + 60
            while not any(e.type == "tool:done" for e in journal.events(handle.id)):
                assert time.monotonic() < deadline, "the MCP tool never finished"
                time.sleep(0.01)
            os.kill(pid, signal.SIGKILL)
            zygote.ask(f"reap {pid}")
            script.unlink()  # the MCP server is gone
            gate.set()
            pid = zygote.ask(f"fork mcp {store_path} {server.url}/v1 {script}")
            assert zygote.ask(f"reap {pid}") == 0
    finally:
        zygote.close()
        os.environ.pop("MCP_EFFECTS", None)
    record = journal.get(handle.id)
    assert record.status == "completed", record.error
    assert record.result == "Snow"
    assert effects.read_text().splitlines() == ["forecast Oslo"]
    assert turns.count(0) == 1  # the journaled first turn was not asked again
    store.close()
