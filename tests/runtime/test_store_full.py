"""A full disk under a durable run is the infrastructure's failure, not the workflow's: the run
is left to be resumed, not ended `failed`, and resumes to completion once a write succeeds."""

from __future__ import annotations

import asyncio

from pyrula.errors import StoreUnavailable
from pyrula.runtime import Worker, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.store_faults import fail_writes
from tests.runtime.support import ask, async_openai, chat_upstream, drive, new_store

UPSTREAM = chat_upstream()


@workflow(name="store_full_ask")
async def store_full_ask(ctx: WorkflowContext, question: str) -> str:
    return await ask(async_openai(UPSTREAM), question)


def test_a_run_that_meets_a_full_disk_is_left_to_resume_then_completes(monkeypatch, caplog):
    UPSTREAM.calls.clear()
    store = new_store()
    failed = fail_writes(monkeypatch, store, where="Exchanges.put", times=1)
    handle = submit(store_full_ask, "q1", store=store)
    asyncio.run(Worker(store, poll_seconds=0.005, lease_seconds=0.2).run(max_runs=1))
    assert failed, "the full disk was never met"
    assert handle.record.status != "failed"
    assert not [e for e in handle.events() if e.type == "run:error"]
    assert "left to be resumed" in caplog.text

    drive(store)  # space is back: the run is resumed once its lease lapses
    assert handle.record.status == "completed"
    assert asyncio.run(handle.result()) == "answer to q1"
    # The call whose recording the full disk refused was not journaled, so it went out again.
    assert len(UPSTREAM.calls) == 2


def test_a_run_whose_database_stays_out_of_reach_is_left_to_resume(monkeypatch, caplog):
    # A PostgreSQL server down for longer than the retry window (`StoreUnavailable`) is the
    # store's failure too: the run must not end `failed` (seen in a server-restart test).
    UPSTREAM.calls.clear()
    store = new_store()
    failed = fail_writes(
        monkeypatch,
        store,
        where="Exchanges.put",
        times=1,
        error=lambda: StoreUnavailable(
            "postgresql://db/pyrula stayed unreachable (server restarting)"
        ),
    )
    handle = submit(store_full_ask, "q2", store=store)
    asyncio.run(Worker(store, poll_seconds=0.005, lease_seconds=0.2).run(max_runs=1))
    assert failed, "the outage was never met"
    assert handle.record.status != "failed"
    assert "left to be resumed" in caplog.text
    drive(store)
    assert handle.record.status == "completed"
