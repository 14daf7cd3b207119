"""Retention: ended runs are purged with everything they hold, never a live one; tokens expire."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from typer.testing import CliRunner

from pyrula.cli.app import app
from pyrula.errors import RunNotFound
from pyrula.runtime import RunStore, Worker, cancel, purge, submit
from pyrula.runtime.retention import parse_duration
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.openai_api import chat_chunks
from tests.fakes.provider import OPENAI_LIB, Upstream, sse_reply
from tests.runtime.support import ask, async_openai, chat_upstream, drive, new_store

UPSTREAM = chat_upstream()
# A streamed reply of 150 KB: its frames fill further pages (the `frames` table).
LONG = Upstream(OPENAI_LIB, lambda request: sse_reply(chat_chunks(["x" * 100] * 1500)))
# Retention works on both backends (the PostgreSQL store inherits it through `Txn`).
pytestmark = pytest.mark.usefixtures("each_backend")


@workflow(name="retained_work")
async def retained_work(ctx: WorkflowContext, n: int) -> str:
    for i in range(n):
        await ctx.step(f"step{i}", lambda i=i: i)
    return await ask(async_openai(UPSTREAM), "hello?")


@workflow(name="retained_waits")
async def retained_waits(ctx: WorkflowContext) -> str:
    answer = await ctx.interrupt("go?")
    return str(answer)


@workflow(name="retained_long")
async def retained_long(ctx: WorkflowContext) -> int:
    stream = await async_openai(LONG).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "long"}], stream=True
    )
    return len("".join([c.choices[0].delta.content or "" async for c in stream if c.choices]))


@workflow(name="retained_fails")
async def retained_fails(ctx: WorkflowContext) -> None:
    await ctx.step("boom", _boom)


def _boom() -> None:
    raise ValueError("boom")


@workflow(name="retained_child")
async def retained_child(ctx: WorkflowContext) -> int:
    return await ctx.step("one", lambda: 1)


@workflow(name="retained_parent")
async def retained_parent(ctx: WorkflowContext) -> int:
    got = await ctx.run_child(retained_child)
    await ctx.interrupt("keep me parked")
    return got


def _entries(store) -> dict[str, int]:
    counts = store.stat()["entries"]
    return {
        name: counts.get(name, 0)
        for name in (
            "runs",
            "events",
            "queue",
            "flags",
            "withheld",
            "exchanges",
            "frames",
            "tokens",
        )
    }


def test_a_purge_deletes_ended_runs_whole_and_never_a_live_one():
    store = new_store()
    done = submit(retained_work, 3, store=store, capture="metadata", idempotency_key="k-done")
    failed = submit(retained_fails, store=store)
    cancelled = submit(retained_work, 1, store=store)
    cancel(cancelled.id, store=store)
    drive(store)
    parked = submit(retained_waits, store=store)
    queued_id = "run_still_queued"
    drive(store)
    submit(retained_work, 1, store=store, run_id=queued_id)  # no worker takes it: stays queued
    running = RunStore(store).claim("elsewhere", ttl=600, names={"retained_work"})
    assert running is not None and running.id == queued_id  # a live lease: running
    statuses = {h.id: h.record.status for h in (done, failed, cancelled, parked)}
    assert statuses == {
        done.id: "completed",
        failed.id: "failed",
        cancelled.id: "cancelled",
        parked.id: "parked",
    }
    before = _entries(store)
    assert before["withheld"] and before["exchanges"]

    purged = purge(0, store=store, dry_run=True)
    assert {r.id for r in purged.runs} == {done.id, failed.id, cancelled.id}
    assert _entries(store) == before  # a dry run deletes nothing

    purged = purge("1h", store=store)
    assert purged.runs == []  # nothing ended an hour ago yet

    purged = purge(0, store=store)
    assert {r.id for r in purged.runs} == {done.id, failed.id, cancelled.id}
    journal = RunStore(store)
    for gone in (done.id, failed.id, cancelled.id):
        with pytest.raises(RunNotFound):
            journal.get(gone)
        assert journal.events(gone) == []
    # Nothing of them is left in any table: what remains is the two live runs'.
    left = _entries(store)
    assert left["runs"] == 2 and left["withheld"] == 0 and left["exchanges"] == 0
    assert left["events"] == len(journal.events(parked.id)) + len(journal.events(queued_id))
    assert left["flags"] == 1  # the running run's lease
    assert journal.get(parked.id).status == "parked"
    assert journal.get(queued_id).status == "running"


def test_a_purged_runs_long_reply_goes_with_its_frame_pages():
    store = new_store()
    handle = submit(retained_long, store=store)
    drive(store)
    assert handle.record.result == 150_000
    before = _entries(store)
    assert before["frames"] >= 2 and before["exchanges"] == 1
    assert [r.id for r in purge(0, store=store).runs] == [handle.id]
    left = _entries(store)
    assert (left["runs"], left["events"], left["exchanges"], left["frames"]) == (0, 0, 0, 0)


def test_a_live_token_still_attaches_to_its_purged_run_and_expires_by_its_ttl():
    store = new_store()
    first = submit(retained_work, 1, store=store, idempotency_key="order-7", token_ttl=60)
    drive(store)
    purge(0, store=store)

    again = submit(retained_work, 1, store=store, idempotency_key="order-7", token_ttl=60)
    assert (again.id, again.created) == (first.id, False)  # attached, not run again
    assert RunStore(store).find(first.id) is None

    # Past the token's TTL the purge expires it, and the key starts new work.
    assert purge(0, store=store, dry_run=False).tokens == 0
    from pyrula.runtime.retention import purge as purge_policy

    assert purge_policy(RunStore(store), 0, now=time.time() + 61).tokens == 1
    fresh = submit(retained_work, 1, store=store, idempotency_key="order-7")
    assert fresh.created and fresh.id != first.id


def test_a_child_goes_with_its_parent_never_before_it():
    store = new_store()
    parent = submit(retained_parent, store=store)
    drive(store)
    journal = RunStore(store)
    child_id = next(e.payload["child"] for e in parent.events() if e.type == "child:started")
    assert journal.get(child_id).status == "completed"
    assert journal.get(parent.id).status == "parked"

    assert purge(0, store=store).runs == []  # the parked parent still replays its child
    assert journal.get(child_id).status == "completed"

    cancel(parent.id, store=store)
    drive(store)
    purged = purge(0, store=store)
    assert [r.id for r in purged.runs] == [child_id, parent.id]
    assert journal.find(child_id) is None and journal.find(parent.id) is None


def test_a_long_run_is_purged_in_bounded_transactions():
    store = new_store()
    handle = submit(retained_work, 25, store=store)
    drive(store)
    journal = RunStore(store)
    events = len(journal.events(handle.id))
    commits: list[int] = []
    original = store.write

    def counted(fn, **options):
        commits.append(1)
        return original(fn, **options)

    store.write = counted
    try:
        assert journal.purge_run(handle.id, batch=4)
    finally:
        del store.write
    assert journal.find(handle.id) is None and journal.events(handle.id) == []
    assert len(commits) >= events // 4  # never the whole run in one transaction


def test_a_worker_with_a_retention_purges_what_ended_before_it():
    store = new_store()
    old = submit(retained_work, 1, store=store)
    drive(store)
    asyncio.run(Worker(store, poll_seconds=0.005, retention="0s").run(until_idle=True))
    assert RunStore(store).find(old.id) is None
    kept = submit(retained_work, 1, store=store)
    drive(store)
    asyncio.run(Worker(store, poll_seconds=0.005, retention="30d").run(until_idle=True))
    assert RunStore(store).get(kept.id).status == "completed"


def test_runs_purge_on_the_command_line():
    store = new_store()
    handle = submit(retained_work, 1, store=store)
    drive(store)
    runner = CliRunner()
    args = ["runs", "purge", "--store", store.location, "--older-than", "0s"]
    listed = runner.invoke(app, [*args, "--dry-run", "--json"])
    assert listed.exit_code == 0, listed.output
    report = json.loads(listed.output)
    assert report["dry_run"] and [r["id"] for r in report["runs"]] == [handle.id]
    assert RunStore(store).find(handle.id) is not None
    done = runner.invoke(app, args)
    assert done.exit_code == 0 and "purged 1 run(s)" in done.output
    assert RunStore(store).find(handle.id) is None
    bad = runner.invoke(app, ["runs", "purge", "--store", store.location, "--older-than", "soon"])
    assert bad.exit_code == 2 and "30d" in bad.output
    worker = runner.invoke(
        app,
        [
            "worker",
            "--import",
            "json",
            "--store",
            store.location,
            "--until-idle",
            "--retention",
            "a month",
        ],
    )
    assert worker.exit_code == 2 and "--retention" in worker.output


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30d", 30 * 86400),
        ("12h", 43200),
        ("90m", 5400),
        ("45", 45.0),
        ("2w", 14 * 86400),
        ("1.5h", 5400),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds
