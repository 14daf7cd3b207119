"""The issue's proof: a real LangGraph graph (InMemorySaver) whose `as_langgraph_node` node runs a
workflow with a `durable_chat_model`-wrapped `ChatOpenAI`; the worker is SIGKILLed mid-run and
another resumes it. Counted at the stand-in provider and the tool's own side-effect log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from pyrula.agents.integrations import as_langgraph_node
from pyrula.journal.store import open_store
from pyrula.runtime import RunStore
from tests.agents.integrations.langchain_support import reply_for
from tests.fakes.clock import wait_until
from tests.fakes.server import Server, serving
from tests.runtime.support import WorkerProcess

APP = "tests.agents.integrations.graph_app"


class State(TypedDict, total=False):
    topic: str
    rounds: int
    report: Any


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_a_killed_worker_mid_node_resumes_with_nothing_repeated(tmp_path):
    path, log, gate = tmp_path / "store", tmp_path / "effects.log", tmp_path / "gate"
    store = open_store(path)
    workers: list[WorkerProcess] = []
    with Server(serving(reply_for)) as server:

        def to_input(state: State) -> dict[str, Any]:
            return {
                "topic": state["topic"],
                "rounds": state.get("rounds", 0),
                "provider": server.url,
                "log": str(log),
                "gate": str(gate),
            }

        builder = StateGraph(State)
        builder.add_node(
            "research", as_langgraph_node("lg_research", store=store, output_key="report",
                                          input=to_input, poll_seconds=0.01)
        )  # fmt: skip
        builder.add_node("count", lambda s: {"rounds": s.get("rounds", 0) + 1})
        builder.add_edge(START, "research")
        builder.add_edge("research", "count")
        builder.add_conditional_edges(
            "count", lambda s: "research" if s["rounds"] < 2 else END, ["research", END]
        )
        graph = builder.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "crash-1"}}

        async def scenario() -> tuple[Any, Any]:
            workers.append(WorkerProcess(path, "--lease-seconds", "5", module=APP))
            task = asyncio.create_task(graph.ainvoke({"topic": "Oslo"}, config))
            await asyncio.to_thread(wait_until, lambda: "ready 0" in _lines(log), "the step")
            workers[0].kill()  # SIGKILL, mid-run: one model call and the tool step are done
            gate.touch()
            # The killed worker's lease frees the run within seconds; the next holds a long one.
            # (A lease that lapses under a slow heartbeat lets a second attempt resend a call
            # whose reply the first could no longer journal: keep leases well above a beat.)
            workers.append(WorkerProcess(path, "--lease-seconds", "30", module=APP))
            paused = await task  # the resumed run parks on its interrupt: the graph pauses
            final = await graph.ainvoke(Command(resume="yes"), config)
            return paused, final

        try:
            paused, final = asyncio.run(scenario())
        finally:
            for worker in workers:
                worker.kill()
        bodies = [seen.body for seen in server.seen]

    assert [i.value for i in paused["__interrupt__"]] == ["publish 21C in Oslo?"]
    assert final["report"] == "answer to Summarise 21C in Oslo (auto), 1"
    # Zero repeated provider calls: two per pass, each sent once, though a worker died mid-run.
    asked = [json.loads(body)["messages"][-1]["content"] for body in bodies]
    assert len(asked) == 4 and len(set(asked)) == 4, asked
    effects = _lines(log)
    looked_up = [e for e in effects if e.startswith("looked up")]
    assert looked_up == ["looked up Oslo 0", "looked up Oslo 1"]
    # The body ran again after the kill (and after the answer), replaying what was done.
    assert effects.count("ready 0") >= 2
    journal = RunStore(store)
    runs = sorted(journal.runs(), key=lambda r: r.created_at)
    assert len(runs) == 2 and all(r.status == "completed" for r in runs)  # the cycle's own run
    assert all(r.token.startswith("crash-1::") for r in runs)
    events = journal.events(runs[0].id)
    assert [e.payload["question"] for e in events if e.type == "interrupt"] == [
        "publish 21C in Oslo?"
    ]
    assert [e.payload["answer"] for e in events if e.type == "interrupt:answer"] == ["yes"]
    assert len([e for e in events if e.type == "llm:done"]) == 2
