"""The native half of `pyrula demo`: Pyrula's own agent loop (no provider SDK) with a `@tool` and
an MCP server's tool, run once live against the stand-in, then replayed from its journal.

The replay is a fork of the finished run at its last event: every model turn, tool call and MCP
call is answered from the journal, so the stand-in sees no new request and no tool runs again.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyrula.agents import Agent, MCPServerStdio, OpenAILLM, tool
from pyrula.demo.standin import StandIn
from pyrula.journal import open_store
from pyrula.runtime import RunStore, Worker, fork, submit

AGENT_NAME = "pyrula-demo-native"
PROMPT = "Where is order A-7?"


@dataclass
class NativeResult:
    """What the native run did live and on its replay."""

    run_id: str
    replay_id: str
    answer: Any
    replayed_answer: Any
    provider_calls_live: int
    provider_calls_replay: int
    effects: list[str]
    with_mcp: bool
    model_turns: int = 0
    problems: list[str] = field(default_factory=list)

    def failures(self) -> list[str]:
        found = list(self.problems)
        if self.replayed_answer != self.answer:
            found.append("the replay's answer differs from the live one")
        if self.provider_calls_replay:
            found.append(f"the replay sent {self.provider_calls_replay} request(s) to the provider")
        tools = 2 if self.with_mcp else 1
        if len(self.effects) != tools:
            found.append(f"{len(self.effects)} tool runs for {tools} tools: {self.effects}")
        return found


def _effects_log() -> Path:
    return Path(tempfile.mkdtemp(prefix="pyrula-demo-")) / "effects.log"


def _build_agent(base_url: str, effects: Path) -> tuple[Agent, bool]:
    @tool(name="order_status")
    def order_status(order: str) -> str:
        """Where an order is in the warehouse."""
        with effects.open("a") as log:
            log.write(f"tool order_status {order}\n")
        return "packed, waiting for the carrier"

    with_mcp = importlib.util.find_spec("mcp") is not None
    servers = (
        [
            MCPServerStdio(
                sys.executable,
                ["-m", "pyrula.demo.mcp_tools"],
                env={**os.environ, "PYRULA_DEMO_EFFECTS": str(effects)},
                name="carrier",
            )
        ]
        if with_mcp
        else []
    )
    agent = Agent(
        name=AGENT_NAME,
        model=OpenAILLM("gpt-4o-mini", base_url=base_url, api_key="sk-demo-not-a-real-key"),
        instructions="Answer questions about orders; use the tools.",
        tools=[order_status],
        mcp_servers=servers,
        max_turns=4,
    )
    return agent, with_mcp


def _drive(store: Any) -> None:
    asyncio.run(Worker(store, poll_seconds=0.01).run(until_idle=True))


def run_native(store_path: str | os.PathLike[str]) -> NativeResult:
    """Run the native agent live on the stand-in, then replay it as a fork; count what each did."""
    store = open_store(Path(store_path))
    effects = _effects_log()
    with StandIn() as standin:
        agent, with_mcp = _build_agent(standin.openai_base_url, effects)
        handle = submit(agent, PROMPT, store=store)
        _drive(store)
        live_calls = standin.count()
        journal = RunStore(store)
        events = journal.events(handle.id)
        replay = fork(handle.id, events[-1].seq, store=store)
        _drive(store)
        replay_calls = standin.count() - live_calls
    record, replayed = journal.get(handle.id), journal.get(replay.id)
    error = record.error or {}
    problems = (
        []
        if record.status == "completed"
        else [f"the live run ended {record.status}: {error.get('type')}: {error.get('message')}"]
    )
    return NativeResult(
        run_id=handle.id,
        replay_id=replay.id,
        answer=record.result,
        replayed_answer=replayed.result,
        provider_calls_live=live_calls,
        provider_calls_replay=replay_calls,
        effects=effects.read_text().splitlines() if effects.exists() else [],
        with_mcp=with_mcp,
        model_turns=sum(1 for e in events if e.type == "llm:done"),
        problems=problems,
    )


def render(result: NativeResult, say: Any) -> None:
    """What the native run did, a line each (`say` prints one)."""
    say(f"answer: {result.answer}")
    say(
        f"live: {result.model_turns} model turns, {result.provider_calls_live} requests reached "
        f"the stand-in; tools ran: {', '.join(result.effects) or 'none'}"
    )
    if not result.with_mcp:
        say("(no MCP server: install the mcp SDK, `pip install 'pyrula[mcp]'`, to add one)")
    say(
        f"replay ({result.replay_id}, a fork at the last event): "
        f"{result.provider_calls_replay} requests, tools run in all: {len(result.effects)}, "
        f"same answer: {result.replayed_answer == result.answer}"
    )
