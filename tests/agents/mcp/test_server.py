"""The real `mcp` client calling `pyrula mcp serve` over stdio; a real worker runs the calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from pyrula.agents.mcp import build_mcp_server
from pyrula.errors import ToolRegistrationError, ToolServerUnavailable
from pyrula.journal.store import open_store
from pyrula.runtime import AgentContext, RunStore, cancel, tool
from tests.agents.mcp.support import Reply, Setup, WorkerProcess, stdio
from tests.fakes.clock import wait_until


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    setup = Setup()
    worker: WorkerProcess = setup.worker()
    yield setup
    worker.kill()


def calls(setup: Setup, *script: tuple[str, dict[str, Any], str | None]) -> list[Any]:
    async def main() -> dict[str, dict[str, Any]]:
        async with stdio(setup) as client:
            return [await client.call(name, args, key) for name, args, key in script]

    return anyio.run(main)


def test_tools_list_carries_schemas_from_the_signature_and_read_only_hint(setup: Setup) -> None:
    async def main() -> dict[str, dict[str, Any]]:
        async with stdio(setup) as client:
            return await client.list_tools()

    listed = anyio.run(main)
    assert set(listed) == {"charge_card", "lookup", "ship", "refund", "explode", "nested"}
    assert listed["lookup"]["annotations"]["readOnlyHint"] is True
    assert not listed["charge_card"].get("annotations", {}).get("readOnlyHint")
    charge = listed["charge_card"]["inputSchema"]
    assert charge["properties"]["cents"]["type"] == "integer"
    assert charge["required"] == ["order_id", "cents"]
    # The context parameter is the server's to pass; a pydantic argument keeps its schema.
    assert set(listed["lookup"]["inputSchema"]["properties"]) == {"order_id"}
    ship = listed["ship"]["inputSchema"]
    assert "Address" in str(ship) and "city" in str(ship)
    assert listed["charge_card"]["description"] == "Charge an order's card."


def test_a_key_runs_the_tool_once_and_other_arguments_conflict(setup: Setup) -> None:
    first, again, other = calls(
        setup,
        ("charge_card", {"order_id": "k-1", "cents": 5}, "key-1"),
        ("charge_card", {"order_id": "k-1", "cents": 5}, "key-1"),
        ("charge_card", {"order_id": "k-1", "cents": 7}, "key-1"),
    )
    assert not first.isError and '"charged": "k-1"' in first.text
    assert again.text == first.text and not again.isError
    assert other.isError and "IdempotencyConflict" in other.text
    assert setup.lines("effect k-1") == ["effect k-1 5"]
    # The key survives a reconnect: a new session (a new server process) re-attaches.
    (later,) = calls(setup, ("charge_card", {"order_id": "k-1", "cents": 5}, "key-1"))
    assert later.text == first.text
    assert setup.lines("effect k-1") == ["effect k-1 5"]


def test_without_a_key_each_call_is_its_own_run(setup: Setup) -> None:
    # Two sessions, each sending its first call as JSON-RPC id 1: the id is never a key.
    calls(setup, ("charge_card", {"order_id": "nokey", "cents": 1}, None))
    calls(setup, ("charge_card", {"order_id": "nokey", "cents": 1}, None))
    assert setup.lines("effect nokey") == ["effect nokey 1", "effect nokey 1"]


def test_tool_context_has_no_turn_and_workflow_context_tools_get_one(setup: Setup) -> None:
    looked, shipped = calls(
        setup,
        ("lookup", {"order_id": "o-9"}, None),
        ("ship", {"order_id": "o-9", "to": {"street": "1 Main", "city": "Lyon"}}, None),
    )
    assert '"idempotency_key": null' in looked.text
    assert '"run": "run_' in looked.text
    assert shipped.text == "AtomicWorkflowContext shipped o-9 to Lyon"


def test_errors_come_back_as_tool_errors_with_their_message(setup: Setup) -> None:
    (failed,) = calls(setup, ("explode", {"message": "card declined"}, None))
    assert failed.isError
    assert "ValueError: card declined" in failed.text


def test_a_predicate_tool_fails_the_call_whose_condition_holds(setup: Setup) -> None:
    small, large = calls(
        setup,
        ("refund", {"order_id": "r-1", "cents": 100}, None),
        ("refund", {"order_id": "r-2", "cents": 50_000}, None),
    )
    assert not small.isError and small.text == "refunded 100"
    assert large.isError and "ToolRefused" in large.text
    assert setup.lines("effect refund") == ["effect refund r-1 100"]


@pytest.mark.parametrize(
    ("what", "named"),
    [
        ("step", "ctx.step"),
        ("interrupt", "ctx.interrupt"),
        ("sleep", "ctx.sleep"),
        ("signal", "ctx.wait_signal"),
        ("child", "ctx.run_child"),
    ],
)
def test_a_tool_body_cannot_orchestrate(setup: Setup, what: str, named: str) -> None:
    (result,) = calls(setup, ("nested", {"what": what}, None))
    assert result.isError
    assert f"AtomicToolViolation: {named}" in result.text
    assert "inside a tool served over MCP" in result.text


def test_requires_approval_true_is_refused_when_the_server_is_built(tmp_path: Any) -> None:
    @tool(requires_approval=True)
    def wire_money(to: str) -> str:
        return to

    with pytest.raises(ToolRegistrationError, match="requires_approval=True"):
        build_mcp_server([wire_money], store=tmp_path)


def test_agent_context_tools_are_refused_when_the_server_is_built(tmp_path: Any) -> None:
    @tool
    async def ask_model(ctx: AgentContext, question: str) -> str:
        return question

    with pytest.raises(ToolRegistrationError, match="context-generic"):
        build_mcp_server([ask_model], store=tmp_path)


def test_a_store_that_cannot_be_used_is_pyrulas_own_error(tmp_path: Any) -> None:
    not_a_store = tmp_path / "file"
    not_a_store.write_text("not a store")
    with pytest.raises(ToolServerUnavailable, match="--store path"):
        build_mcp_server([], store=not_a_store)


def test_a_cancel_on_the_store_ends_the_waiting_call(setup: Setup) -> None:

    async def main() -> Any:
        async with stdio(setup) as client:
            async with anyio.create_task_group() as tasks:
                results: list[Any] = []

                async def call() -> None:
                    results.append(
                        await client.call("charge_card", {"order_id": "hold-c", "cents": 3}, "c1")
                    )

                tasks.start_soon(call)
                await anyio.to_thread.run_sync(
                    lambda: wait_until(lambda: setup.lines("start hold-c"), "the tool to start")
                )
                journal = RunStore(open_store(setup.store))
                (run,) = [
                    r
                    for r in journal.runs()
                    if r.status == "running" and r.input["args"][0].get("order_id") == "hold-c"
                ]
                cancel(run.id, store=setup.store)
            return results[0]

    result = anyio.run(main)
    setup.open_gate("hold-c")
    assert result.isError and "DurableInvocationCancelled" in result.text


def test_no_worker_within_the_timeout_is_pyrulas_own_error() -> None:
    lonely = Setup()

    async def main() -> Any:
        async with stdio(lonely, "--worker-timeout", "0.3") as client:
            return await client.call("charge_card", {"order_id": "w", "cents": 1}, "w1")

    result = anyio.run(main)
    assert result.isError
    message = result.text
    assert "Pyrula could not run this tool call (ToolServerUnavailable)" in message
    assert "pyrula mcp worker --import" in message
    assert lonely.lines() == []


def _cancel_requested(setup: Setup, order_id: str) -> bool:
    """Whether the run charging `order_id` has its cancel journaled (the store is shared by this
    module's tests, and another one cancels a run of its own)."""
    with open_store(setup.store, create=False) as store:
        return any(
            run.cancel_requested and run.input["args"][0].get("order_id") == order_id
            for run in RunStore(store).runs()
        )


def test_an_mcp_cancel_notification_cancels_the_run(setup: Setup) -> None:
    args = {"order_id": "hold-n", "cents": 8}

    async def main() -> Reply:
        async with stdio(setup) as client:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call, "charge_card", args, "n1")
                await anyio.to_thread.run_sync(
                    lambda: wait_until(lambda: setup.lines("start hold-n"), "the tool to start")
                )
                await client.cancel_latest(tasks)
            # The server takes the notification in its own time: open the gate only once the
            # run's cancel is in the store, or the tool may finish first (a race, not a refusal).
            await anyio.to_thread.run_sync(
                lambda: wait_until(
                    lambda: _cancel_requested(setup, "hold-n"), "the cancel to be journaled"
                )
            )
            setup.open_gate("hold-n")
            # The same key re-attaches to the cancelled run.
            return await client.call("charge_card", args, "n1")

    again = anyio.run(main)
    assert again.isError and "DurableInvocationCancelled" in again.text
