"""A child run still open when its parent ends is closed by its parent_close policy."""

from __future__ import annotations

import asyncio

import pytest

from pyrula.agents import AgentContext, AgentLimits, BudgetExceeded, agent
from pyrula.runtime import RunStore, Worker, cancel, fork, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.openai_api import chat_completion
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply
from tests.runtime.support import ask, async_openai, chat_upstream, drive, new_store, run_to_rest

# The runtime's conformance: each test runs on LMDB and on PostgreSQL.
pytestmark = pytest.mark.usefixtures("each_backend")


@workflow(name="waits_forever")
async def waits_forever(ctx: WorkflowContext) -> str:
    return str(await ctx.wait_signal("never"))


@workflow(name="parent_of_waiter")
async def parent_of_waiter(ctx: WorkflowContext, policy: str) -> str:
    return str(await ctx.run_child(waits_forever, parent_close=policy))


async def _run_until_parent_waits(store, policy):
    handle = submit(parent_of_waiter, policy, store=store)
    journal = RunStore(store)
    worker = Worker(store, poll_seconds=0.005)
    task = asyncio.ensure_future(worker.run())
    while not any(e.type == "child:started" for e in journal.events(handle.id)):
        await asyncio.sleep(0.01)
    child = next(e for e in journal.events(handle.id) if e.type == "child:started")
    child_id = child.payload["child"]
    while journal.get(child_id).status != "parked":
        await asyncio.sleep(0.01)
    cancel(handle.id, store=store)
    while journal.get(handle.id).status not in ("cancelled", "failed", "completed"):
        await asyncio.sleep(0.01)
    for _ in range(100):  # let a cancelled child reach its boundary
        if journal.get(child_id).status in ("cancelled", "parked") and policy != "cancel":
            break
        if journal.get(child_id).status == "cancelled":
            break
        await asyncio.sleep(0.01)
    worker.stop()
    await task
    return journal.get(handle.id).status, journal.get(child_id).status


@pytest.mark.parametrize(
    ("policy", "child_status"),
    [("cancel", "cancelled"), ("terminate", "cancelled"), ("abandon", "parked")],
)
def test_parent_close_policy_decides_the_open_child(policy, child_status):
    parent, child = asyncio.run(_run_until_parent_waits(new_store(), policy))
    assert parent == "cancelled"
    assert child == child_status


def test_an_unknown_policy_is_refused():
    @workflow(name="bad_policy")
    async def bad_policy(ctx: WorkflowContext) -> None:
        await ctx.run_child(waits_forever, parent_close="orphan")

    store = new_store()
    handle = submit(bad_policy, store=store)
    asyncio.run(Worker(store, poll_seconds=0.005).run(until_idle=True))
    assert "parent_close" in RunStore(store).get(handle.id).error["message"]


BIG = {"prompt_tokens": 400_000, "completion_tokens": 100_000, "total_tokens": 500_000}
EXPENSIVE = Upstream(OPENAI_LIB, lambda request: json_reply(chat_completion("costly", usage=BIG)))
CHEAP = chat_upstream()


@agent(name="spends_a_lot")
async def spends_a_lot(ctx: AgentContext) -> str:
    return await ask(async_openai(EXPENSIVE), "spend")


@agent(name="capped_parent", limits=AgentLimits(max_total_tokens=100_000))
async def capped_parent(ctx: AgentContext) -> str:
    first = await ask(async_openai(CHEAP), "before the child")
    await ctx.run_child(spends_a_lot)
    try:
        await ask(async_openai(CHEAP), "after the child")
    except BudgetExceeded as refused:
        return f"{first}; refused: {refused.limit}"
    return "not refused"


def test_a_childs_spend_counts_against_its_parents_caps():
    CHEAP.calls.clear()
    handle = run_to_rest(capped_parent)
    assert asyncio.run(handle.result()) == "answer to before the child; refused: max_total_tokens"
    assert len(CHEAP.calls) == 1  # the refused call was never sent
    [spend] = [e.payload for e in handle.events() if e.type == "child:spend"]
    assert spend["total_tokens"] == 500_000


@agent(name="capped_child", limits=AgentLimits(max_llm_calls=3, max_cost_usd=0.5))
async def capped_child(ctx: AgentContext) -> str:
    return "done"


@workflow(name="parent_of_capped")
async def parent_of_capped(ctx: WorkflowContext) -> str:
    return await ctx.run_child(capped_child)


def test_a_runs_record_keeps_the_caps_it_is_held_to():
    handle = run_to_rest(parent_of_capped)
    run_store = handle.run_store
    assert "limits" not in handle.record.options  # a workflow has no caps
    [child] = [e.payload["child"] for e in handle.events() if e.type == "child:started"]
    assert run_store.get(child).options == {
        "parent": handle.id,
        "limits": {"max_llm_calls": 3, "max_cost_usd": 0.5},
    }
    # Submitted by name from a process that imports it, and forked: the caps are kept.
    by_name = submit("capped_parent", store=run_store.store)
    assert by_name.record.options == {"limits": {"max_total_tokens": 100_000}}
    forked = fork(by_name.id, 1, store=run_store.store)
    assert forked.record.options == {"limits": {"max_total_tokens": 100_000}}


CHILD_CALLS = chat_upstream("child says")


@agent(name="child_that_asks_once")
async def child_that_asks_once(ctx: AgentContext, question: str) -> str:
    return await ask(async_openai(CHILD_CALLS), question)


@workflow(name="parent_of_asker")
async def parent_of_asker(ctx: WorkflowContext) -> str:
    first = await ctx.run_child(child_that_asks_once, "one")
    second = await ctx.step("after", lambda: f"{first} / after")
    return str(second)


def test_a_fork_after_a_child_started_replays_the_child_not_its_calls():
    CHILD_CALLS.calls.clear()
    handle = run_to_rest(parent_of_asker)
    assert asyncio.run(handle.result()) == "child says one / after"
    assert len(CHILD_CALLS.calls) == 1
    started = next(e for e in handle.events() if e.type == "child:started")
    store = handle.run_store.store
    forked = fork(handle.id, started.seq, store=store)
    drive(store)
    assert asyncio.run(forked.result()) == "child says one / after"
    assert len(CHILD_CALLS.calls) == 1  # the fork's child replayed the call, paid once
    [child] = [e.payload["child"] for e in forked.events() if e.type == "child:started"]
    assert child.startswith(forked.id)  # the fork's own child, not the source's
    assert handle.run_store.get(child).options["parent"] == forked.id
