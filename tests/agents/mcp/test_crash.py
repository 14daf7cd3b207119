"""Server and worker SIGKILLed mid-tool and restarted: each side effect happens once (the
tool's own log counts), and the client's retry with the same key gets the one result."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from pyrula.journal.store import open_store
from pyrula.runtime import RunStore
from tests.agents.mcp.support import HttpServer, Setup, http, wait_until


async def _call(url: str, args: dict[str, Any], key: str) -> Any:
    async with http(url) as client:
        return await client.call("charge_card", args, key)


def queued(setup: Setup) -> bool:
    return setup.store.exists() and bool(RunStore(open_store(setup.store)).runs())


def _in_thread(condition: Any, what: str) -> Any:
    return anyio.to_thread.run_sync(lambda: wait_until(condition, what))


def test_a_worker_killed_mid_tool_is_replaced_and_the_waiting_call_gets_the_result() -> None:
    setup = Setup()
    first = setup.worker()
    server = HttpServer(setup)
    args = {"order_id": "hold-w", "cents": 4}

    async def main() -> Any:
        async with anyio.create_task_group() as tasks:
            results: list[Any] = []

            async def call() -> None:
                results.append(await _call(server.url, args, "kw"))

            tasks.start_soon(call)
            await _in_thread(lambda: setup.lines("start hold-w"), "the tool to start")
            first.kill()  # SIGKILL, between the tool's start and its effect
            setup.open_gate("hold-w")
            second = setup.worker()
            await _in_thread(lambda: results, "the call's result")
            second.kill()
        return results[0]

    try:
        result = anyio.run(main)
    finally:
        server.kill()
    assert not result.isError and '"charged": "hold-w"' in result.text
    assert setup.lines("start hold-w") == ["start hold-w 4", "start hold-w 4"]
    assert setup.lines("effect hold-w") == ["effect hold-w 4"]


@pytest.mark.parametrize("when", ["queued", "mid-tool"])
def test_a_server_killed_mid_call_is_restarted_and_the_retry_reattaches(when: str) -> None:
    setup = Setup()
    args = {"order_id": "hold-s", "cents": 6}
    worker = setup.worker() if when == "mid-tool" else None
    server = HttpServer(setup)

    async def abandoned_call() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_call, server.url, args, "ks")
            if when == "mid-tool":
                await _in_thread(lambda: setup.lines("start hold-s"), "the tool to start")
            else:
                # The call's run is in the store, and no worker has taken it.
                await _in_thread(lambda: queued(setup), "the run to be queued")
            server.kill()  # SIGKILL: the client's connection drops with it
            tasks.cancel_scope.cancel()

    anyio.run(abandoned_call)
    setup.open_gate("hold-s")
    worker = worker or setup.worker()
    restarted = HttpServer(setup)
    try:
        retry = anyio.run(_call, restarted.url, args, "ks")
        fresh = anyio.run(_call, restarted.url, {"order_id": "other", "cents": 1}, "ks")
    finally:
        restarted.kill()
        worker.kill()
    assert not retry.isError and '"charged": "hold-s"' in retry.text
    assert setup.lines("effect hold-s") == ["effect hold-s 6"]
    assert fresh.isError and "IdempotencyConflict" in fresh.text
