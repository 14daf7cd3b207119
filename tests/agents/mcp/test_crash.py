"""Server and worker SIGKILLed mid-tool and restarted: each side effect happens once (the
tool's own log counts), and the client's retry with the same key gets the one result."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from pyrula.journal.store import open_store
from pyrula.runtime import RunStore
from tests.agents.mcp.support import HttpServer, Setup, WorkerProcess, http


async def _call(url: str, args: dict[str, Any], key: str) -> Any:
    async with http(url) as client:
        return await client.call("charge_card", args, key)


def queued(setup: Setup) -> bool:
    return setup.store.exists() and bool(RunStore(open_store(setup.store)).runs())


async def _until(condition: Callable[[], Any], what: str, timeout: float = 60) -> None:
    """Poll `condition` (the tools' log, the store) on the client's loop: the call goes on
    meanwhile, and a call that fails cancels the wait, so its own error is what the test shows
    (a wait in a thread cannot be cancelled: it ran on into its timeout)."""
    with anyio.move_on_after(timeout) as waited:
        while not condition():
            await anyio.sleep(0.005)
    if waited.cancelled_caught:
        raise AssertionError(f"timed out waiting for {what}")


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
            await _until(lambda: setup.lines("start hold-w"), "the tool to start")
            first.kill()  # SIGKILL, between the tool's start and its effect
            setup.open_gate("hold-w")
            second = setup.worker()
            await _until(lambda: results, "the call's result")
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
                await _until(lambda: setup.lines("start hold-s"), "the tool to start")
            else:
                # The call's run is in the store, and no worker has taken it.
                await _until(lambda: queued(setup), "the run to be queued")
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


# Seeds whose draws cover every (victim, point) pair: see `_draw`.
SEEDS = [0, 1, 2, 4, 5, 6, 7, 9, 20]


def _draw(seed: int) -> tuple[list[str], str]:
    """Which processes die (server, worker or both, in a seeded order) and at which point:
    `before` the tool starts (its run queued, no worker on it), `mid` tool (after `start`,
    before the effect), `after` the effect (before the tool returns and its result is
    journaled)."""
    rng = random.Random(seed)
    victims = {"server": ["server"], "worker": ["worker"], "both": ["server", "worker"]}
    chosen = list(victims[rng.choice(sorted(victims))])
    point = rng.choice(["before", "mid", "after"])
    rng.shuffle(chosen)
    return chosen, point


def _reached(setup: Setup, order: str, point: str) -> Callable[[], bool]:
    if point == "before":
        return lambda: queued(setup) and not setup.lines(f"start {order}")
    return lambda: bool(setup.lines(f"{'start' if point == 'mid' else 'effect'} {order}"))


def test_the_seeds_cover_every_victim_and_point() -> None:
    drawn = {(tuple(sorted(victims)), point) for victims, point in map(_draw, SEEDS)}
    assert len(drawn) == 3 * 3


@pytest.mark.parametrize("seed", SEEDS)
def test_processes_killed_at_seeded_points_run_the_effect_as_documented(seed: int) -> None:
    """SIGKILL the drawn processes at the drawn point, open the gates, restart what died, and
    retry with the same `_meta.idempotency_key`: the one result, one completed run, and the
    effect count docs/mcp.md states."""
    victims, point = _draw(seed)
    setup = Setup()
    order, key = f"seed-{seed}", f"key-{seed}"
    args = {"order_id": order, "cents": 100 + seed}
    # `before` the tool starts: no worker is alive when the call's run is queued (a worker
    # that is a victim dies idle first), so no worker can have taken the run.
    worker: WorkerProcess | None = None
    if point != "before" or "worker" in victims:
        worker = setup.worker()
        if point == "before":
            worker.kill()
    if point == "after":
        setup.open_gate(order)  # on to the effect; held after it until `ORDER.after` opens
    server = HttpServer(setup)

    def restart_worker() -> None:
        nonlocal worker
        if worker is None or worker.process.poll() is not None:
            worker = setup.worker()

    async def first_call() -> Any:
        results: list[Any] = []

        async def call() -> None:
            results.append(await _call(server.url, args, key))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await _until(_reached(setup, order, point), f"the {point} point")
            for victim in victims:  # SIGKILL
                (server if victim == "server" else worker or server).kill()
            if "server" in victims:
                tasks.cancel_scope.cancel()  # the client's connection dropped with the server
                return None
            setup.open_gate(order)
            setup.open_gate(f"{order}.after")
            restart_worker()
            await _until(lambda: results, "the call's result")
        return results[0]

    try:
        first = anyio.run(first_call)
        setup.open_gate(order)
        setup.open_gate(f"{order}.after")
        restart_worker()
        if "server" in victims:
            server = HttpServer(setup)
        retry = anyio.run(_call, server.url, args, key)
    finally:
        server.kill()
        if worker is not None:
            worker.kill()

    assert not retry.isError and f'"charged": "{order}"' in retry.text, retry
    if first is not None:
        assert retry == first
    # What docs/mcp.md promises: the effect once, except a worker killed after the effect and
    # before the result is journaled, which runs the tool again on resume.
    rerun = "worker" in victims and point != "before"
    effects = 2 if "worker" in victims and point == "after" else 1
    assert len(setup.lines(f"start {order}")) == (2 if rerun else 1)
    assert setup.lines(f"effect {order}") == [f"effect {order} {100 + seed}"] * effects
    runs = list(RunStore(open_store(setup.store)).runs())
    assert [r.status for r in runs] == ["completed"]
    done = [e for e in RunStore(open_store(setup.store)).events(runs[0].id) if e.type == "run:done"]
    assert len(done) == 1
