"""`as_langgraph_node`: a durable run as one node of a real LangGraph graph, awaited from a
worker on the same store; the interrupt bridge, run identity, cancellation, and setup errors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from pyrula.agents import DurableInvocationCancelled
from pyrula.agents.integrations import as_langgraph_node
from pyrula.errors import IdempotencyConflict, IntegrationSetupError
from pyrula.runtime import RunStore, Worker, WorkflowContext, cancel, workflow
from tests.runtime.support import new_store

STEPS: list[str] = []


class State(TypedDict, total=False):
    topic: str
    rounds: int
    report: Any


@workflow(name="lg_approve")
async def approve(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    await ctx.step("draft", lambda: STEPS.append(f"draft {request['topic']}"))
    verdict = await ctx.interrupt(f"approve {request['topic']}?")
    second = await ctx.interrupt("sure?")
    return f"{request['topic']}: {verdict}/{second}"


@workflow(name="lg_plain")
async def plain(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    await ctx.step("work", lambda: STEPS.append(f"work {request['rounds']}"))
    return f"round {request['rounds']}"


@workflow(name="lg_waits")
async def waits(ctx: WorkflowContext, request: dict[str, Any]) -> str:
    while True:  # until cancelled: each sleep is a boundary where the cancel is seen
        await ctx.step("tick", lambda: None)
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def worker_on(store: Any) -> AsyncIterator[None]:
    task = asyncio.create_task(Worker(store, poll_seconds=0.005).run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _graph(node: Any, *, cycle: int = 0, checkpointer: Any = None) -> Any:
    builder = StateGraph(State)
    builder.add_node("durable", node)
    builder.add_node("count", lambda s: {"rounds": s.get("rounds", 0) + 1})
    builder.add_edge(START, "durable")
    builder.add_edge("durable", "count")
    builder.add_conditional_edges(
        "count", lambda s: "durable" if s["rounds"] <= cycle else END, ["durable", END]
    )
    return builder.compile(checkpointer=checkpointer or InMemorySaver())


def _input(state: State) -> dict[str, Any]:
    return {"topic": state.get("topic", ""), "rounds": state.get("rounds", 0)}


def test_the_interrupt_bridge_journals_questions_and_answers_and_resume_reattaches():
    store = new_store()
    graph = _graph(as_langgraph_node(approve, store=store, output_key="report", input=_input))
    config = {"configurable": {"thread_id": "t-1"}}
    STEPS.clear()

    async def scenario() -> list[Any]:
        async with worker_on(store):
            first = await graph.ainvoke({"topic": "Oslo"}, config)
            second = await graph.ainvoke(Command(resume="yes"), config)
            third = await graph.ainvoke(Command(resume="very"), config)
        return [first, second, third]

    first, second, third = asyncio.run(scenario())
    assert [i.value for i in first["__interrupt__"]] == ["approve Oslo?"]
    assert [i.value for i in second["__interrupt__"]] == ["sure?"]
    assert third["report"] == "Oslo: yes/very"
    journal = RunStore(store)
    (run,) = list(journal.runs())
    assert run.token.startswith("t-1::") and run.token.endswith("::durable")
    events = journal.events(run.id)
    asked = [e.payload["question"] for e in events if e.type == "interrupt"]
    answered = [e.payload["answer"] for e in events if e.type == "interrupt:answer"]
    assert asked == ["approve Oslo?", "sure?"] and answered == ["yes", "very"]
    assert STEPS == ["draft Oslo"]  # the re-attached run replayed its step, never re-ran it


def test_every_cycle_pass_and_every_new_ainvoke_starts_its_own_run():
    store = new_store()
    node = as_langgraph_node(plain, store=store, input=_input, output_key="report")
    graph = _graph(node, cycle=1)
    STEPS.clear()

    async def scenario() -> list[Any]:
        async with worker_on(store):
            one = await graph.ainvoke({"topic": "x"}, {"configurable": {"thread_id": "a"}})
            two = await graph.ainvoke({"topic": "x"}, {"configurable": {"thread_id": "a"}})
        return [one, two]

    one, two = asyncio.run(scenario())
    assert one["report"] == "round 1" and one["rounds"] == 2  # two passes of the cycle
    assert two["report"] == "round 2" and two["rounds"] == 3  # a new ainvoke on the thread
    runs = list(RunStore(store).runs())
    assert len(runs) == 3 and len({r.token for r in runs}) == 3
    assert STEPS == ["work 0", "work 1", "work 2"]


def test_reattaching_with_a_different_input_raises_a_value_error():
    store = new_store()
    inputs = iter([{"topic": "a"}, {"topic": "b"}])
    node = as_langgraph_node(approve, store=store, input=lambda s: next(inputs))
    graph = _graph(node)
    config = {"configurable": {"thread_id": "t-2"}}

    async def scenario() -> None:
        async with worker_on(store):
            await graph.ainvoke({"topic": "a"}, config)
            await graph.ainvoke(Command(resume="yes"), config)

    with pytest.raises(ValueError) as raised:
        asyncio.run(scenario())
    assert isinstance(raised.value, IdempotencyConflict)


def test_a_graph_without_a_checkpointer_or_a_store_without_a_worker_is_named():
    store = new_store()
    builder = StateGraph(State)
    builder.add_node("durable", as_langgraph_node(plain, store=store, input=_input))
    builder.add_edge(START, "durable")
    with pytest.raises(IntegrationSetupError, match="checkpointer"):
        asyncio.run(builder.compile().ainvoke({"topic": "x"}))
    lonely = _graph(as_langgraph_node(plain, store=store, input=_input, worker_timeout=0.05))
    with pytest.raises(IntegrationSetupError, match="worker"):
        asyncio.run(lonely.ainvoke({"topic": "x"}, {"configurable": {"thread_id": "t-3"}}))


def test_a_cancel_on_the_store_ends_the_node_and_cancelling_the_task_only_detaches():
    store = new_store()
    graph = _graph(as_langgraph_node(waits, store=store, input=_input))
    config = {"configurable": {"thread_id": "t-4"}}
    journal = RunStore(store)

    async def scenario() -> None:
        async with worker_on(store):
            task = asyncio.create_task(graph.ainvoke({"topic": "x"}, config))
            while [r.status for r in journal.runs()] != ["running"]:
                await asyncio.sleep(0.005)
            task.cancel()  # detaches: the run goes on
            with contextlib.suppress(asyncio.CancelledError):
                await task
            (run,) = list(journal.runs())
            assert journal.get(run.id).status == "running"
            again = asyncio.create_task(graph.ainvoke(None, config))  # re-attaches
            cancel(run.id, store=store)
            with pytest.raises(DurableInvocationCancelled):
                await again
            assert len(list(journal.runs())) == 1

    asyncio.run(scenario())
