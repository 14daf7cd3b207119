"""A worker's own store calls on PostgreSQL wait on the server off its event loop.

The worker's event loop runs all its runs; each of its own store calls (a run's start: its
events, its input, its `run:attempt`; releasing a run; ending one cancelled before it began;
an idle worker's scan for work left) goes through `pyrula.journal.async_store.acall`. Here
another session holds what that call must wait for (`tests.fakes.postgres.HeldStore`) while a
heartbeat task on the worker's loop counts its turns: the call waits on the server, the loop
turns. With the store calls made in place, the loop stops until the hold is let go, and each
test fails.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, Worker, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.postgres import HeldStore, fresh_url, while_held
from tests.runtime.support import drive


@workflow(name="held_worker_quick")
async def held_worker_quick(ctx: WorkflowContext, word: str) -> str:
    return f"done {word}"


@pytest.fixture
def store() -> Any:
    opened = Store(fresh_url())
    yield opened
    opened.close()


def _claimed(store: Store) -> tuple[Any, Worker, Any]:
    """A run of `held_worker_quick` submitted, and claimed by a new worker (not yet begun)."""
    handle = submit(held_worker_quick, "w", store=store)
    worker = Worker(store, poll_seconds=0.005)
    run = worker.run_store.claim(worker.worker_id, worker.lease_seconds, {"held_worker_quick"})
    assert run is not None and run.id == handle.id
    return handle, worker, run


def _held_while(store: Store, table: str | None, work: Any) -> tuple[int, int]:
    """Run `work()` (a coroutine) on a new loop while `table` (None: the store's write lock) is
    held: how many statements waited behind the hold, and how often the loop turned meanwhile."""

    async def main() -> tuple[int, int]:
        held = HeldStore(store.url, table=table, safety=10)
        task = asyncio.ensure_future(work())
        try:
            return await while_held(held, task, 1)
        finally:
            held.release()
            await task

    return asyncio.run(main())


@pytest.mark.parametrize(
    "table",
    ["pyrula_events", "pyrula_queue", None],
    ids=["reading-its-events", "reading-its-input", "writing-run-attempt"],
)
def test_a_runs_start_waits_on_the_server_off_the_loop(store: Store, table: str | None) -> None:
    handle, worker, run = _claimed(store)
    waiting, ticks = _held_while(store, table, lambda: worker.execute(run))
    assert waiting >= 1 and ticks > 0
    record = handle.record
    assert record.status == "completed" and record.result == "done w"
    assert [e.type for e in handle.events()].count("run:attempt") == 1


def test_releasing_a_run_waits_on_the_server_off_the_loop(store: Store) -> None:
    handle, worker, run = _claimed(store)
    worker._in_flight.cancelling = True  # claimed as the drain ended: handed straight back
    waiting, ticks = _held_while(store, None, lambda: worker.execute(run))
    assert waiting >= 1 and ticks > 0
    assert handle.record.status == "queued" and handle.record.lease is None


def test_ending_a_run_cancelled_before_it_began_waits_off_the_loop(store: Store) -> None:
    handle, worker, run = _claimed(store)
    RunStore(store).request_cancel(handle.id)
    run = RunStore(store).get(handle.id)  # as claimed, with its cancel asked for
    waiting, ticks = _held_while(store, None, lambda: worker.execute(run))
    assert waiting >= 1 and ticks > 0
    assert handle.record.status == "cancelled"


def test_an_idle_workers_scan_for_work_left_waits_off_the_loop(store: Store) -> None:
    handle = submit(held_worker_quick, "w", store=store)
    drive(store)
    assert handle.record.status == "completed"
    worker = Worker(store, poll_seconds=0.005)
    executed: list[int] = []

    async def idle() -> None:
        executed.append(await worker.run(until_idle=True))

    # The queue is empty, so only the scan of the runs (is any still to come?) reads them.
    waiting, ticks = _held_while(store, "pyrula_runs", idle)
    assert waiting >= 1 and ticks > 0
    assert executed == [0]


def test_a_run_whose_lease_moved_before_its_first_event_ends_the_attempt_not_the_worker(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # The attempt's `run:attempt` finds its lease gone (here ended by hand; on many hosts, a
    # lease that ran out while that write waited behind a lock): the attempt stops and says
    # so, and the worker's other runs go on (before, the refusal escaped and ended the worker).
    handle, worker, run = _claimed(store)
    RunStore(store).terminate(handle.id)
    with caplog.at_level("WARNING", logger="pyrula"):
        asyncio.run(worker.execute(run))
    assert f"run {handle.id} attempt 1 lost its lease" in caplog.text
    assert handle.record.status == "cancelled"
    assert "run:attempt" not in [e.type for e in handle.events()]
