"""Durable runs in-process: replay, interrupts, sleeps, signals, children, forks, capture."""

from __future__ import annotations

import asyncio
import json

import pytest

from pyrula.errors import (
    DurableInvocationCancelled,
    IdempotencyConflict,
    ReplayInputChanged,
    RunExists,
)
from pyrula.runtime import RunStore, answer, cancel, fork, resume, signal, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.runtime.support import ask, async_openai, chat_upstream, drive, new_store, run_to_rest

# The runtime's conformance: each test runs on LMDB and on PostgreSQL.
pytestmark = pytest.mark.usefixtures("each_backend")

EFFECTS: list[str] = []


@pytest.fixture(autouse=True)
def _clear():
    EFFECTS.clear()


def effect(name: str) -> str:
    EFFECTS.append(name)
    return name.upper()


UPSTREAM = chat_upstream()


@workflow(name="approve_then_finish")
async def approve_then_finish(ctx: WorkflowContext, order: str) -> dict:
    client = async_openai(UPSTREAM)
    first = await ctx.step("reserve", effect, f"reserve {order}")
    opinion = await ask(client, f"should we ship {order}?")
    verdict = await ctx.interrupt({"ship": order, "model says": opinion})
    second = await ctx.step("ship", effect, f"ship {order} ({verdict})")
    return {"first": first, "second": second, "opinion": opinion}


def test_a_parked_run_resumes_without_redoing_finished_work():
    UPSTREAM.calls.clear()
    store = new_store()
    handle = run_to_rest(approve_then_finish, "o-1", store=store)
    assert handle.record.status == "parked"
    assert EFFECTS == ["reserve o-1"] and len(UPSTREAM.calls) == 1
    parked = handle.events()[-1]
    assert parked.type == "run:parked"
    assert parked.payload["question"]["model says"] == "answer to should we ship o-1?"

    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "completed"
    assert EFFECTS == ["reserve o-1", "ship o-1 (yes)"]
    assert len(UPSTREAM.calls) == 1  # the model call replayed from the journal
    assert asyncio.run(handle.result())["second"] == "SHIP O-1 (YES)"


PROMPT = {"text": "first prompt"}


@workflow(name="prompt_changes")
async def prompt_changes(ctx: WorkflowContext) -> str:
    reply = await ask(async_openai(UPSTREAM), PROMPT["text"])
    await ctx.interrupt("continue?")
    return reply


def test_a_changed_model_request_on_resume_names_the_difference():
    store = new_store()
    handle = run_to_rest(prompt_changes, store=store)
    PROMPT["text"] = "second prompt"
    try:
        answer(handle.id, "go", store=store)
        drive(store)
    finally:
        PROMPT["text"] = "first prompt"
    record = handle.record
    assert record.status == "failed"
    assert record.error["type"] == ReplayInputChanged.__name__
    assert "messages[0].content changed" in record.error["message"]


@workflow(name="echo")
async def echo(ctx: WorkflowContext, value: str) -> str:
    return await ctx.step("echo", effect, value)


def test_idempotency_keys_attach_and_conflict():
    store = new_store()
    first = submit(echo, "a", store=store, idempotency_key="order-7")
    again = submit(echo, "a", store=store, idempotency_key="order-7")
    assert again.id == first.id and not again.created
    with pytest.raises(IdempotencyConflict, match="different input"):
        submit(echo, "b", store=store, idempotency_key="order-7")
    with pytest.raises(RunExists, match="idempotency_key"):
        submit(echo, "a", store=store, run_id=first.id)
    drive(store)
    assert EFFECTS == ["a"]


def test_an_expired_idempotency_key_starts_a_new_run():
    store = new_store()
    first = submit(echo, "a", store=store, idempotency_key="k", token_ttl=-1)
    second = submit(echo, "a", store=store, idempotency_key="k")
    assert second.id != first.id


def test_a_cancel_before_the_body_starts_runs_nothing():
    store = new_store()
    handle = submit(echo, "never", store=store)
    cancel(handle.id, store=store)
    drive(store)
    assert handle.record.status == "cancelled" and EFFECTS == []
    with pytest.raises(DurableInvocationCancelled):
        asyncio.run(handle.result())


@workflow(name="cancel_midway")
async def cancel_midway(ctx: WorkflowContext) -> None:
    await ctx.step("one", effect, "one")
    cancel(ctx.run_id, store=ctx._attempt.run_store.store)
    await ctx.step("two", effect, "two")


def test_a_cancel_is_seen_at_the_next_step():
    handle = run_to_rest(cancel_midway)
    assert handle.record.status == "cancelled"
    assert EFFECTS == ["one"]


FLAKY = {"fails": 2}


def flaky() -> str:
    EFFECTS.append("try")
    if FLAKY["fails"]:
        FLAKY["fails"] -= 1
        raise ConnectionError("flaky")
    return "ok"


@workflow(name="retrying")
async def retrying(ctx: WorkflowContext) -> str:
    return await ctx.step("flaky", flaky, retries=3, backoff=0.001)


def test_a_step_is_retried_with_backoff_then_journaled():
    FLAKY["fails"] = 2
    handle = run_to_rest(retrying)
    assert asyncio.run(handle.result()) == "ok"
    assert EFFECTS == ["try", "try", "try"]
    assert [e.type for e in handle.events()].count("step:retry") == 2


@workflow(name="always_fails")
async def always_fails(ctx: WorkflowContext) -> str:
    await ctx.step("fine", effect, "fine")
    return await ctx.step("broken", lambda: 1 / 0)


def test_a_failed_run_resumes_and_replays_its_finished_steps():
    store = new_store()
    handle = run_to_rest(always_fails, store=store)
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        asyncio.run(handle.result())
    resume(handle.id, store=store)
    drive(store)
    assert EFFECTS == ["fine"]  # the journaled failure replays too: nothing ran again
    assert handle.record.status == "failed"


RESULTS = ["text \ud800", 2**63, -(2**70), True, None, 1.5, {"a": [1, "b"]}, (1, 2)]


@workflow(name="step_results")
async def step_results(ctx: WorkflowContext) -> list:
    got = [await ctx.step(f"r{i}", effect_of, value) for i, value in enumerate(RESULTS)]
    # More digits than an int can be written with: the step fails as itself, journaled.
    try:
        await ctx.step("huge", effect_of, 10**5000)
    except ValueError as exc:
        got.append(type(exc).__name__)
    await ctx.step("stop", lambda: 1 / 0)
    return got


def effect_of(value: object) -> object:
    EFFECTS.append("ran")
    return value


def test_step_results_come_back_on_replay_as_they_came_back_live():
    store = new_store()
    handle = run_to_rest(step_results, store=store)
    with pytest.raises(ZeroDivisionError):
        asyncio.run(handle.result())
    events = RunStore(store).events(handle.id)
    live = [e.payload.get("result") for e in events if e.type == "step:done"]
    # JSON's view of each value, as a replay hands it back (a tuple comes back a list).
    assert live == [json.loads(json.dumps(v)) for v in RESULTS]
    assert [e.payload["name"] for e in events if e.type == "step:error"] == ["huge", "stop"]
    ran = len(EFFECTS)
    resume(handle.id, store=store)
    drive(store)
    assert len(EFFECTS) == ran  # every outcome replayed: nothing ran again
    replayed = RunStore(store).events(handle.id)
    assert [e.payload.get("result") for e in replayed if e.type == "step:done"] == live


@workflow(name="sleepy")
async def sleepy(ctx: WorkflowContext) -> str:
    await ctx.sleep(0.01)
    await ctx.sleep(3600)
    return "awake"


def test_a_long_sleep_parks_and_wakes_on_resume():
    store = new_store()
    handle = run_to_rest(sleepy, store=store)
    assert handle.record.status == "parked"
    assert handle.record.wake_at > 1_000
    resume(handle.id, store=store)  # wake it now instead of in an hour
    drive(store)
    assert handle.record.status == "parked"  # the journaled deadline still holds


@workflow(name="waits_for_signal")
async def waits_for_signal(ctx: WorkflowContext) -> str:
    return str(await ctx.wait_signal("go"))


def test_a_signal_wakes_a_waiting_run():
    store = new_store()
    handle = run_to_rest(waits_for_signal, store=store)
    assert handle.record.status == "parked"
    signal(handle.id, "go", "now", store=store)
    drive(store)
    assert asyncio.run(handle.result()) == "now"


@workflow(name="child")
async def child(ctx: WorkflowContext, n: int) -> int:
    return await ctx.step("square", lambda: n * n)


@workflow(name="parent")
async def parent(ctx: WorkflowContext) -> int:
    return await ctx.run_child(child, 7) + 1


def test_a_child_run_returns_its_result():
    handle = run_to_rest(parent)
    assert asyncio.run(handle.result()) == 50


@workflow(name="three_steps")
async def three_steps(ctx: WorkflowContext) -> list[str]:
    return [await ctx.step(f"s{i}", effect, f"s{i}") for i in range(3)]


def test_a_fork_replays_up_to_its_event_and_goes_live_after():
    store = new_store()
    source = run_to_rest(three_steps, store=store)
    first_step = next(e for e in source.events() if e.type == "step:done")
    EFFECTS.clear()
    branch = fork(source.id, first_step.seq, store=store)
    drive(store)
    assert asyncio.run(branch.result()) == ["S0", "S1", "S2"]
    assert EFFECTS == ["s1", "s2"]
    assert branch.record.forked_from == {"run": source.id, "at_seq": first_step.seq}


def test_metadata_capture_keeps_no_input_or_result():
    store = new_store()
    handle = run_to_rest(echo, "private", store=store, capture="metadata")
    record = handle.record
    assert record.status == "completed"
    assert record.input is None and record.result is None
    assert handle.events()[-1].payload == {"result": None}


class Declined(Exception):
    def __init__(self, card: str) -> None:
        super().__init__(f"card {card} declined")
        self.card = card


def charge(card: str) -> str:
    EFFECTS.append(f"charge {card}")
    raise Declined(card)


@workflow(name="withheld_steps")
async def withheld_steps(ctx: WorkflowContext, customer: str) -> str:
    profile = await ctx.step("profile", effect, f"profile of {customer}")
    try:
        await ctx.step("charge", charge, "4242-secret")
    except Declined as declined:
        caught = f"{type(declined).__name__}: {declined} ({declined.card})"
    verdict = await ctx.interrupt("continue?")
    return f"{profile} / {caught} / {verdict}"


def test_metadata_capture_withholds_step_results_and_errors_yet_replays_them():
    store = new_store()
    handle = run_to_rest(withheld_steps, "alice", store=store, capture="metadata")
    assert handle.record.status == "parked"
    shown = json.dumps([e.payload for e in handle.events()])
    assert "PROFILE OF ALICE" not in shown and "4242" not in shown and "alice" not in shown
    done = next(e for e in handle.events() if e.type == "step:done")
    assert done.payload["result"] is None and done.payload["withheld"] is True
    error = next(e for e in handle.events() if e.type == "step:error").payload["error"]
    assert set(error) == {"type", "module", "qualname"} and error["type"] == "Declined"

    answer(handle.id, "go", store=store)
    drive(store)
    record = handle.record
    assert record.status == "completed" and record.result is None
    # The replay read the withheld result and the whole failure: same value, same branch.
    assert EFFECTS == ["profile of alice", "charge 4242-secret"]
    kept = RunStore(store).withheld(handle.id, "run")
    caught = "Declined: card 4242-secret declined (4242-secret)"
    assert kept == {"result": f"PROFILE OF ALICE / {caught} / go"}
    assert "4242" not in json.dumps([e.payload for e in handle.events()])
    resumed = [e for e in handle.events() if e.type in ("step:done", "step:error")]
    assert len(resumed) == 2  # nothing journaled twice


@workflow(name="withheld_child")
async def withheld_child(ctx: WorkflowContext, n: int) -> int:
    return await ctx.step("square", lambda: n * n)


@workflow(name="withheld_parent")
async def withheld_parent(ctx: WorkflowContext) -> int:
    return 1 + await ctx.run_child(withheld_child, 7)


def test_below_io_a_parent_still_gets_its_childs_withheld_result():
    store = new_store()
    handle = run_to_rest(withheld_parent, store=store, capture="metadata")
    assert handle.record.status == "completed"
    assert RunStore(store).withheld(handle.id, "run") == {"result": 50}
    assert handle.events()[-1].payload == {"result": None}


def test_below_io_a_fork_replays_the_withheld_results_it_was_seeded_with():
    store = new_store()
    source = run_to_rest(withheld_steps, "bob", store=store, capture="metadata")
    assert source.record.status == "parked"
    profile = next(e for e in source.events() if e.type == "step:done")
    EFFECTS.clear()
    branch = fork(source.id, profile.seq, store=store)
    drive(store)
    assert branch.record.status == "parked"
    assert EFFECTS == ["charge 4242-secret"]  # the profile step replayed, not run again
    assert RunStore(store).withheld(branch.id, profile.payload["position"]) == {
        "result": "PROFILE OF BOB"
    }


@workflow(name="count_steps")
async def count_steps(ctx: WorkflowContext, run: int, n: int) -> int:
    total = 0
    for i in range(n):
        total += await ctx.step(f"s{i}", lambda i=i: i)
    return total


def test_concurrent_runs_of_a_worker_share_commits_and_each_journals_every_step():
    store = new_store()
    runs, steps = 8, 15
    handles = [submit(count_steps, r, steps, store=store) for r in range(runs)]
    commits: list[int] = []
    original = store.write

    def counted(fn, **options):
        commits.append(1)
        return original(fn, **options)

    store.write = counted
    try:
        drive(store)
    finally:
        del store.write
    transactions = len(commits)
    for handle in handles:
        assert handle.record.status == "completed" and handle.record.result == sum(range(steps))
        done = [e for e in handle.events() if e.type == "step:done"]
        assert [e.payload["position"] for e in done] == [f"main/step{i}" for i in range(steps)]
    # The step facts of runs executing at once were committed in groups, not one by one.
    assert transactions < runs * steps
