"""Async runs on a PostgreSQL store: what waits on the server never holds the event loop.

An async body's model calls, its journal writes and `RunHandle.wait` reach the store through
`pyrula.journal.async_store`. Here another session holds what the store must wait for
(`tests.fakes.postgres.HeldStore`), and a heartbeat task on the run's loop counts its ticks:
they go on while the store's statements wait on the server. The conformance tests
(test_runs, test_children, test_tool_rules) run the same paths on both backends.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import openai
import pytest

import pyrula
from pyrula.agents.compat.openai import AsyncOpenAI as DropInAsyncOpenAI
from pyrula.journal.store import Store, open_store
from pyrula.runtime import RunStore, answer, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.clock import wait_until
from tests.fakes.openai_api import chat_chunks, openai_client
from tests.fakes.postgres import HeldStore, fresh_url, while_held
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply, sse_reply
from tests.runtime.support import WorkerProcess, ask, async_openai, chat_upstream, drive

UPSTREAM = chat_upstream()
N = 4
SEEN: dict[str, Any] = {}


@pytest.fixture
def store() -> Iterator[Store]:
    """A store on the suite's PostgreSQL, its URL in `SEEN` for the run's body to hold."""
    store = Store(fresh_url())
    SEEN.clear()
    SEEN["url"] = store.url
    yield store
    store.close()


@workflow(name="async_calls_held")
async def async_calls_held(ctx: WorkflowContext, n: int) -> list[str]:
    client = async_openai(UPSTREAM)
    held = HeldStore(SEEN["url"], safety=10)  # from now on, every write of the store waits
    calls = asyncio.gather(*(ask(client, f"q{i}") for i in range(n)))
    SEEN["waiting"], SEEN["ticks"] = await while_held(held, calls, n)
    SEEN["sent"] = len(UPSTREAM.calls)  # all sent before any of their writes went through
    return await calls


def test_concurrent_async_model_calls_go_on_while_their_journal_writes_wait_on_the_server(
    store,
):
    UPSTREAM.calls.clear()
    handle = submit(async_calls_held, N, store=store)
    drive(store)
    record = handle.record
    assert record.status == "completed", record.error
    assert record.result == [f"answer to q{i}" for i in range(N)]
    # Every call had been sent and every call's journal write waited on the server at
    # once, while the run's loop kept turning.
    assert SEEN["sent"] == N and SEEN["waiting"] >= N  # (a lease heartbeat may wait too)
    assert SEEN["ticks"] > 0
    assert sum(1 for e in handle.events() if e.type == "llm:done") == N


@workflow(name="async_step_held")
async def async_step_held(ctx: WorkflowContext) -> int:
    held = HeldStore(SEEN["url"], table="pyrula_flags", safety=10)  # every cancel check waits
    step = asyncio.ensure_future(ctx.step("one", int, 1))
    SEEN["waiting"], SEEN["ticks"] = await while_held(held, step, 1)
    return await step


def test_a_lone_runs_cancel_check_waits_on_the_server_off_the_loop(store):
    handle = submit(async_step_held, store=store)
    drive(store)
    record = handle.record
    assert record.status == "completed" and record.result == 1, record.error
    assert SEEN["waiting"] >= 1 and SEEN["ticks"] > 0


async def _cancelled_from_another_process(store: Store, run_id: str) -> str:
    """Cancel `run_id` from another process (so only its announcement, NOTIFY, can tell this
    one), and return once this loop's listener has counted an announcement since."""
    wake = store.wakeups()
    seen = wake.count
    code = "import sys; from pyrula.runtime import cancel; cancel(sys.argv[1], store=sys.argv[2])"
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", code, run_id, store.url)
    assert await child.wait() == 0
    assert await wake.wait(seen, 30.0)
    return "two"


@workflow(name="async_cancelled_elsewhere")
async def async_cancelled_elsewhere(ctx: WorkflowContext) -> list[str]:
    done = [await ctx.step("one", str, "one")]
    store = ctx._attempt.run_store.store
    done.append(await ctx.step("two", _cancelled_from_another_process, store, ctx.run_id))
    # The boundary of this step sees the cancel: its function never runs.
    done.append(await ctx.step("three", SEEN.setdefault, "three", "ran"))
    return done


def test_a_cancel_from_another_process_is_seen_at_the_next_step_once_it_is_announced():
    # From its second step on, a run's cancel checks read the flag only when the store has
    # announced something since the last read found none (Attempt.acheck_cancel).
    store = Store(fresh_url())
    SEEN.clear()
    try:
        handle = submit(async_cancelled_elsewhere, store=store)
        drive(store)
        assert handle.record.status == "cancelled", handle.record.error
        done = [e.payload["name"] for e in handle.events() if e.type == "step:done"]
        assert done == ["one", "two"] and "three" not in SEEN
    finally:
        store.close()


@workflow(name="async_via_cassette")
async def async_via_cassette(ctx: WorkflowContext) -> str:
    client = async_openai(UPSTREAM)
    if not SEEN.get("hold"):
        return await ask(client, "c")
    held = HeldStore(SEEN["url"], safety=10)  # every write of the run's store waits
    asking = asyncio.ensure_future(ask(client, "c"))
    SEEN["waiting"], SEEN["ticks"] = await while_held(held, asking, 1)
    return await asking


def test_a_run_answered_by_a_tests_cassette_journals_the_reply_off_the_loop(tmp_path):
    UPSTREAM.calls.clear()
    SEEN.clear()
    cassettes = str(tmp_path / "cassettes")
    stores = [Store(fresh_url()), Store(fresh_url())]
    try:
        with pyrula.cassette("async-run", store=cassettes):  # recorded by both
            first = submit(async_via_cassette, store=stores[0])
            drive(stores[0])
        assert first.record.result == "answer to c" and len(UPSTREAM.calls) == 1
        SEEN["url"], SEEN["hold"] = stores[1].url, True
        with pyrula.cassette("async-run", mode="none", store=cassettes):
            handle = submit(async_via_cassette, store=stores[1])
            drive(stores[1])
        record = handle.record
        assert record.status == "completed" and record.result == "answer to c", record.error
        assert len(UPSTREAM.calls) == 1  # the cassette answered
        # Its reply was journaled in the run's store while that store's writes waited on the
        # server, and the run's loop kept turning.
        assert SEEN["waiting"] >= 1 and SEEN["ticks"] > 0
        assert [e.type for e in handle.events()].count("llm:done") == 1
    finally:
        for store in stores:
            store.close()


# A provider that fails every call: the SDK (max_retries=0) gives up on the first reply.
FAILING = Upstream(
    OPENAI_LIB, lambda request: json_reply({"error": {"message": "down", "type": "server"}}, 500)
)


@workflow(name="async_call_fails_held")
async def async_call_fails_held(ctx: WorkflowContext) -> str:
    # The drop-in frames each SDK call: the error it gives up on is journaled as its outcome.
    client = openai_client(FAILING, cls=DropInAsyncOpenAI, journaled=False, max_retries=0)
    if SEEN.get("hold"):  # the SDK gives up while every write of the store waits
        held = HeldStore(SEEN["url"], safety=10)
        failing = asyncio.ensure_future(ask(client, "q"))
        SEEN["waiting"], SEEN["ticks"] = await while_held(held, failing, 1)
        [error] = await asyncio.gather(failing, return_exceptions=True)
        SEEN["hold"] = False
    else:  # the replay: the journaled failure is raised again, nothing sent
        try:
            await ask(client, "q")
        except openai.InternalServerError as exc:
            error = exc
    await ctx.interrupt("again?")
    return type(error).__name__


def test_a_failed_async_call_is_journaled_off_the_loop_and_replays_as_the_same_error(store):
    FAILING.calls.clear()
    SEEN["hold"] = True
    handle = submit(async_call_fails_held, store=store)
    drive(store)
    assert handle.record.status == "parked"
    answer(handle.id, "yes", store=store)
    drive(store)
    record = handle.record
    assert record.status == "completed", record.error
    assert record.result == "InternalServerError"
    # The failure's journal write waited on the server; the loop kept turning meanwhile.
    assert SEEN["waiting"] >= 1 and SEEN["ticks"] > 0
    assert [e.payload["status"] for e in handle.events() if e.type == "llm:done"] == [500]
    assert len(FAILING.calls) == 1  # the resumed run replayed the failure


def _reset(request: Any) -> Any:
    raise OPENAI_LIB.ReadError("connection reset by peer", request=request)


# A provider whose connection drops once the request is in: a transport failure after sending.
DROPPED = Upstream(OPENAI_LIB, _reset)


@workflow(name="async_call_dropped_held")
async def async_call_dropped_held(ctx: WorkflowContext) -> str:
    # The SDK gives up on the failed send while every write of the store waits: the frame's
    # outcome (`RunSession.aend_call`, the transport failure) is written off the loop.
    client = openai_client(DROPPED, cls=DropInAsyncOpenAI, journaled=False, max_retries=0)
    held = HeldStore(SEEN["url"], safety=10)
    failing = asyncio.ensure_future(ask(client, "q"))
    SEEN["waiting"], SEEN["ticks"] = await while_held(held, failing, 1)
    [error] = await asyncio.gather(failing, return_exceptions=True)
    return type(error).__name__


def test_a_transport_failure_after_sending_is_journaled_off_the_loop(store):
    DROPPED.calls.clear()
    handle = submit(async_call_dropped_held, store=store)
    drive(store)
    record = handle.record
    assert record.status == "completed", record.error
    assert record.result == "APIConnectionError"
    assert SEEN["waiting"] >= 1 and SEEN["ticks"] > 0
    # Its outcome is the transport failure: no reply (status 0).
    assert [e.payload["status"] for e in handle.events() if e.type == "llm:done"] == [0]
    assert len(DROPPED.calls) == 1


# A streamed reply of 1,500 chunks (about 400 KB): its record spans several frame pages.
LONG = Upstream(OPENAI_LIB, lambda request: sse_reply(chat_chunks(["x" * 100] * 1500)))


async def _read_stream(client: Any) -> str:
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "long"}], stream=True
    )
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


@workflow(name="async_long_stream")
async def async_long_stream(ctx: WorkflowContext) -> str:
    client = async_openai(LONG)
    if not SEEN.get("hold"):
        text = await _read_stream(client)
    else:  # the replay: every read of a frame page waits on the server
        held = HeldStore(SEEN["url"], table="pyrula_frames", safety=10)
        reading = asyncio.ensure_future(_read_stream(client))
        SEEN["waiting"], SEEN["ticks"] = await while_held(held, reading, 1)
        text = await reading
    await ctx.interrupt("again?")
    return text


def test_replaying_a_long_stream_reads_its_pages_off_the_loop(store):
    LONG.calls.clear()
    handle = submit(async_long_stream, store=store)
    drive(store)
    assert handle.record.status == "parked"
    SEEN["hold"] = True
    answer(handle.id, "yes", store=store)
    drive(store)
    record = handle.record
    assert record.status == "completed", record.error
    assert record.result == "x" * 100 * 1500 and len(LONG.calls) == 1  # replayed
    assert SEEN["waiting"] >= 1 and SEEN["ticks"] > 0


@workflow(name="async_cassette_on_a_server")
async def async_cassette_on_a_server(ctx: WorkflowContext) -> str:
    client = async_openai(LONG)
    if not SEEN.get("hold"):
        return await _read_stream(client)
    held = HeldStore(SEEN["url"], table=SEEN["table"], safety=10)  # the cassette's reads wait
    reading = asyncio.ensure_future(_read_stream(client))
    SEEN["waiting"], SEEN["ticks"] = await while_held(held, reading, 1)
    return await reading


@pytest.mark.parametrize("table", ["pyrula_exchanges", "pyrula_frames"])
def test_a_cassette_on_a_server_is_read_off_the_loop_of_a_run_on_lmdb(tmp_path, table):
    LONG.calls.clear()
    SEEN.clear()
    cassettes = Store(fresh_url())
    runs = [open_store(str(tmp_path / name)) for name in ("recording", "replaying")]
    try:
        with pyrula.cassette("long-run", store=cassettes):  # recorded there, several pages
            submit(async_cassette_on_a_server, store=runs[0])
            drive(runs[0])
        SEEN.update(url=cassettes.url, table=table, hold=True)
        with pyrula.cassette("long-run", mode="none", store=cassettes):
            handle = submit(async_cassette_on_a_server, store=runs[1])
            drive(runs[1])
        record = handle.record
        assert record.status == "completed", record.error
        assert record.result == "x" * 100 * 1500 and len(LONG.calls) == 1  # the cassette's
        # The lookup of its recording (or the reads of its frame pages) waited on the server
        # while the run's loop kept turning.
        assert SEEN["waiting"] >= 1 and SEEN["ticks"] > 0
    finally:
        for store in [cassettes, *runs]:
            store.close()


@workflow(name="async_quick")
async def async_quick(ctx: WorkflowContext) -> str:
    return "done"


def test_an_async_wait_for_a_run_leaves_the_loop_running_and_wakes_on_notify():
    store = Store(fresh_url())
    handle = submit(async_quick, store=store)
    held = HeldStore(store.url, table="pyrula_runs", safety=10)  # every read of a run waits

    async def main() -> tuple[Any, int, int, int]:
        wakeups = store.wakeups()
        await wakeups.start()
        waiter = asyncio.ensure_future(handle.wait())
        still, ticks = await while_held(held, waiter, 1)
        seen = wakeups.count
        await asyncio.to_thread(drive, store)  # another loop runs the run to its end
        record = await waiter
        return record, still, ticks, wakeups.count - seen

    try:
        record, still, ticks, woken = asyncio.run(main())
        assert record.status == "completed" and record.result == "done"
        assert still >= 1 and ticks > 0  # the wait's read waited on the server, the loop ran
        assert woken > 0  # the run's end was announced (NOTIFY), not found by polling
    finally:
        held.release()
        store.close()


@pytest.mark.slow
def test_a_killed_worker_of_concurrent_async_calls_resumes_without_sending_any_again(tmp_path):
    from tests.fakes.server import Script, Seen, Server

    asked: list[str] = []

    def reply(seen: Seen) -> Script:
        question = seen.json()["messages"][-1]["content"]
        asked.append(question)
        body = {"choices": [{"message": {"content": f"re {question}"}}]}
        return Script(frames=[json.dumps(body).encode()])

    url = fresh_url()
    store = Store(url)
    journal = RunStore(store)
    log, gate = tmp_path / "effects.log", tmp_path / "gate"
    log.touch()
    with Server(reply) as provider:
        handle = submit("fan_out", provider.url, str(log), str(gate), N, store=store)
        first = WorkerProcess(url, "--quiet", module="tests.runtime.worker_app")
        try:
            wait_until(lambda: _done(journal, handle.id, "noted"), "the first calls, a step")
        finally:
            first.kill()  # SIGKILL, inside the gated step
        assert journal.get(handle.id).status == "running"
        gate.touch()
        second = WorkerProcess(url, "--quiet", "--until-idle", module="tests.runtime.worker_app")
        assert second.exit_code() == 0, second.stderr
    record = journal.get(handle.id)
    assert record.status == "completed", record.error
    expected = [f"re a{i}" for i in range(N)] + [f"re b{i}" for i in range(N)]
    assert record.result == expected
    # Each call was sent once: the first ones were replayed from the journal after the kill.
    assert Counter(asked) == Counter(f"{p}{i}" for p in "ab" for i in range(N))
    assert log.read_text().splitlines() == ["noted"]  # finished before the kill: not again
    store.close()


def _done(journal: RunStore, run_id: str, name: str) -> bool:
    return any(e.type == "step:done" and e.payload["name"] == name for e in journal.events(run_id))


# -- a test's cassette on a server, outside any run ------------------------------------------


async def _asked_while_held(held: HeldStore) -> tuple[str, int, int]:
    client = async_openai(UPSTREAM)
    asking = asyncio.ensure_future(ask(client, "outside"))
    waiting, ticks = await while_held(held, asking, 1)
    return await asking, waiting, ticks


@pytest.mark.parametrize("table", ["pyrula_exchanges", None], ids=["replay", "record"])
def test_an_async_clients_cassette_on_a_server_waits_off_the_loop_outside_a_run(table):
    # Replaying, the lookup of the recording waits for the held table; recording, the write
    # of the reply waits for the store's write lock. Either way the client's loop turns.
    UPSTREAM.calls.clear()
    cassettes = Store(fresh_url())
    try:
        if table is not None:
            with pyrula.cassette("outside", store=cassettes):
                asyncio.run(ask(async_openai(UPSTREAM), "outside"))
        mode = "none" if table is not None else "once"
        with pyrula.cassette("outside", mode=mode, store=cassettes) as cassette:
            held = HeldStore(cassettes.url, table=table, safety=10)
            text, waiting, ticks = asyncio.run(_asked_while_held(held))
        assert text == "answer to outside" and len(UPSTREAM.calls) == 1
        assert (cassette.stats.replayed, cassette.stats.recorded) == (
            (1, 0) if table is not None else (0, 1)
        )
        assert waiting >= 1 and ticks > 0
    finally:
        cassettes.close()
