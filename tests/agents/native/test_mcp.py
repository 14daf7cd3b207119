"""MCP tools: a real MCP server over stdio and over streamable HTTP gives the agent its tools;
`tools/list` and each result are journaled, so a replay completes with the server down."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyrula.agents import Agent, MCPServerHTTP, MCPServerStdio
from pyrula.agents.testing import AgentRunner
from pyrula.runtime import RunStore, Worker, fork
from tests.fakes.agent_api import calls, model_for, text, upstream

pytest.importorskip("mcp")

SERVER = Path(__file__).with_name("mcp_server.py")


def _replay_with_server_down(runner: AgentRunner, last_seq: int) -> RunStore:
    journal = RunStore(runner.store)
    copy = fork(runner.run_id, last_seq, store=runner.store)
    asyncio.run(Worker(runner.store, poll_seconds=0.01).run(until_idle=True))
    record = journal.get(copy.id)
    assert record.status == "completed", record.error
    assert record.result == "Snow in Oslo"
    return journal


def _agent(name: str, server: MCPServerStdio | MCPServerHTTP, stand_in) -> Agent:
    return Agent(name=name, model=model_for("openai", stand_in=stand_in), mcp_servers=[server])


TURNS = [calls(("forecast", {"city": "Oslo"})), text("Snow in Oslo")]


@pytest.mark.slow
def test_an_mcp_stdio_server_supplies_tools_and_a_replay_needs_it_not(tmp_path):
    effects = tmp_path / "mcp.log"
    script = tmp_path / "server.py"
    shutil.copy(SERVER, script)
    server = MCPServerStdio(sys.executable, [str(script)], env={"MCP_EFFECTS": str(effects)})
    stand_in = upstream("openai", TURNS)
    runner = AgentRunner(_agent("mcp-stdio", server, stand_in))
    events = runner.run_sync("Weather in Oslo?")
    assert events[-1].payload["result"] == "Snow in Oslo"
    assert effects.read_text().splitlines() == ["forecast Oslo"]
    offered = [t["function"]["name"] for t in stand_in.calls[0]["tools"]]
    assert offered == ["forecast", "broken"]
    assert stand_in.calls[1]["messages"][-1]["content"] == '{"result": "Oslo: snow, -2"}'
    listed = [e for e in events if e.type == "step:done"]
    assert listed and listed[0].payload["name"].startswith("mcp:tools/list")
    script.unlink()  # the server can no longer start
    _replay_with_server_down(runner, events[-1].seq)
    assert effects.read_text().splitlines() == ["forecast Oslo"]
    assert len(stand_in.calls) == 2


def test_an_mcp_tool_error_is_told_to_the_model_and_journaled(tmp_path):
    server = MCPServerStdio(sys.executable, [str(SERVER)])
    stand_in = upstream("openai", [calls(("broken", {"city": "Oslo"})), text("Snow in Oslo")])
    runner = AgentRunner(_agent("mcp-broken", server, stand_in))
    events = runner.run_sync("Weather?")
    errors = [e.payload for e in events if e.type == "tool:error"]
    assert errors and errors[0]["error"]["type"] == "MCPToolError"
    told = stand_in.calls[1]["messages"][-1]["content"]
    assert told.startswith("MCPToolError: MCP tool 'broken' failed")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_an_mcp_http_server_supplies_tools_and_a_replay_needs_it_not(tmp_path):
    effects = tmp_path / "mcp.log"
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env={"MCP_EFFECTS": str(effects), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the MCP server never listened"
                time.sleep(0.05)
        server = MCPServerHTTP(
            f"http://127.0.0.1:{port}/mcp", headers={"authorization": "Bearer mcp-secret-1234"}
        )
        stand_in = upstream("openai", TURNS)
        runner = AgentRunner(_agent("mcp-http", server, stand_in))
        events = runner.run_sync("Weather in Oslo?")
        assert events[-1].payload["result"] == "Snow in Oslo"
    finally:
        process.terminate()
        process.wait(10)
    _replay_with_server_down(runner, events[-1].seq)
    assert effects.read_text().splitlines() == ["forecast Oslo"]
    raw = b"".join(p.read_bytes() for p in Path(runner.store.path).rglob("*") if p.is_file())
    assert b"mcp-secret-1234" not in raw
