"""`@tool` rules: approval decided per call, the context chosen by annotation, who is charged."""

from __future__ import annotations

import asyncio

import pytest

from pyrula.agents import AgentContext, ToolContext, agent, tool
from pyrula.runtime import answer
from pyrula.workflows import WorkflowContext, workflow
from tests.runtime.support import ask, async_openai, chat_upstream, drive, new_store, run_to_rest

# The runtime's conformance: each test runs on LMDB and on PostgreSQL.
pytestmark = pytest.mark.usefixtures("each_backend")

PAID: list[int] = []


@tool(requires_approval=lambda amount, currency="EUR": amount > 100)
def refund(amount: int, currency: str = "EUR") -> str:
    PAID.append(amount)
    return f"refunded {amount} {currency}"


@agent(name="refunds")
async def refunds(ctx: AgentContext) -> list[str]:
    return [await refund(20), await refund(500, currency="USD")]


def test_an_approval_predicate_parks_only_the_calls_it_holds_for():
    PAID.clear()
    store = new_store()
    handle = run_to_rest(refunds, store=store)

    assert handle.record.status == "parked"
    question = handle.events()[-1].payload["question"]
    assert question == {"approve_tool": "refund", "arguments": {"args": [500], "currency": "USD"}}
    assert PAID == [20]  # the small refund did not wait

    answer(handle.id, {"approved": True}, store=store)
    drive(store)
    assert asyncio.run(handle.result()) == ["refunded 20 EUR", "refunded 500 USD"]
    assert PAID == [20, 500]


def test_any_other_answer_declines_the_call():
    PAID.clear()
    store = new_store()
    handle = run_to_rest(refunds, store=store)
    answer(handle.id, "no, too much", store=store)
    drive(store)
    assert handle.record.status == "failed"
    assert handle.record.error["type"] == "ToolRefused"
    assert PAID == [20]


SEEN: list[str] = []


@tool
def plain(ctx: str) -> str:  # an ordinary first argument, whatever its name
    SEEN.append(f"plain got {ctx!r}")
    return ctx


@tool
def keyed(context: ToolContext, order: str) -> str:
    SEEN.append(f"keyed got {type(context).__name__} key={context.idempotency_key}")
    return order


@tool
def whole_run(run: WorkflowContext) -> str:
    SEEN.append(f"whole_run got {type(run).__name__} for {run.run_id}")
    return run.run_id


@workflow(name="context_by_annotation")
async def context_by_annotation(ctx: WorkflowContext) -> list[str]:
    return [await plain("just a string"), await keyed("A-1", tool_call_id="c1"), await whole_run()]


def test_the_context_is_chosen_by_the_first_parameters_annotation():
    SEEN.clear()
    handle = run_to_rest(context_by_annotation)
    result = asyncio.run(handle.result())

    assert result[:2] == ["just a string", "A-1"]
    assert [
        "plain got 'just a string'",
        "keyed got ToolContext key=c1",
        f"whole_run got WorkflowContext for {handle.id}",
    ] == SEEN


UPSTREAM = chat_upstream()


@tool
async def asks_model(question: str) -> str:
    return await ask(async_openai(UPSTREAM), question)


@workflow(name="charges")
async def charges(ctx: WorkflowContext) -> str:
    await asks_model("from the body")
    return await ctx.step("in a step", asks_model, "from a step")


def test_a_tool_called_from_the_body_is_charged_to_the_run():
    handle = run_to_rest(charges)
    asyncio.run(handle.result())
    done = [e.payload for e in handle.events() if e.type == "llm:done"]

    assert [d["within"] for d in done] == ["run", "tool"]


def test_an_optional_context_annotation_still_asks_for_the_context():
    from pyrula.runtime.tools import context_wanted

    def optional(ctx: ToolContext | None, text: str) -> str:
        return text

    def quoted(ctx: "ToolContext | None", text: str) -> str:  # noqa: UP037
        return text

    def other(ctx: int | None, text: str) -> str:
        return text

    assert [context_wanted(f) for f in (optional, quoted, other)] == ["tool", "tool", None]


def test_writes_is_deprecated_and_changes_nothing_about_the_tool():
    """`@tool(writes=...)` was stored and never read: it now warns, naming the fix, and the tool
    it builds journals and replays like any other."""
    with pytest.warns(DeprecationWarning, match=r"writes=.*has no effect.*delete the argument"):

        @tool(writes=["orders"])
        def ship(order: str) -> str:
            SHIPPED.append(order)
            return f"shipped {order}"

    with pytest.warns(DeprecationWarning, match="has no effect"):
        assert ship.writes == ()

    @workflow(name="ships_twice_asked")
    async def ships(ctx: WorkflowContext) -> str:
        shipped = await ship("o-1")
        await ctx.interrupt("done?")
        return shipped

    SHIPPED.clear()
    store = new_store()
    handle = run_to_rest(ships, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    assert (handle.record.status, handle.record.result) == ("completed", "shipped o-1")
    assert SHIPPED == ["o-1"]  # journaled once, replayed on the resume


SHIPPED: list[str] = []
