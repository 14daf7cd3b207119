"""`pyrula runs ...`: list, show, answer, cancel, resume and fork runs from the shell."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from pyrula.cli.app import app
from pyrula.runtime import RunStore, answer, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.runtime.support import drive, new_store


@workflow(name="cli_asks")
async def cli_asks(ctx: WorkflowContext, who: str) -> str:
    first = await ctx.step("greet", lambda: f"hello {who}")
    reply = await ctx.interrupt("proceed?")
    return f"{first}; {reply['decision']}"


# The deployed code of `cli_ships`: broken until the test "fixes" it, as a redeploy would.
_CODE = {"broken": True}
_LABELS_PRINTED: list[str] = []


def _print_label(order: str) -> str:
    _LABELS_PRINTED.append(order)
    return f"label-{order}"


@workflow(name="cli_ships")
async def cli_ships(ctx: WorkflowContext, order: str) -> str:
    label = await ctx.step("label", _print_label, order)
    if _CODE["broken"]:
        raise RuntimeError("the carrier rejected the parcel")
    return f"{label} shipped"


@workflow(name="cli_naps")
async def cli_naps(ctx: WorkflowContext) -> str:
    await ctx.step("before", lambda: "noted")
    await ctx.sleep(3600)
    return "rested"


def _runs(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["runs", *args], env={"COLUMNS": "160"})
    return result.exit_code, result.output


def test_ls_show_answer_and_fork_from_the_command_line():
    store = new_store()
    handle = submit(cli_asks, "ada", store=store)
    drive(store)
    path = str(store.path)

    code, out = _runs("ls", "--store", path, "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "parked"

    code, out = _runs("show", handle.id, "--store", path)
    assert code == 0 and "run:parked" in out and "proceed?" in out

    code, out = _runs("answer", handle.id, '{"decision": "go"}', "--store", path)
    assert code == 0, out
    drive(store)
    assert RunStore(store).get(handle.id).result == "hello ada; go"

    greet = next(e for e in RunStore(store).events(handle.id) if e.type == "step:done")
    code, out = _runs("fork", handle.id, "--at", str(greet.seq), "--store", path, "--json")
    assert code == 0, out
    forked = json.loads(out)["run"]
    drive(store)
    assert RunStore(store).get(forked).status == "parked"  # it asks again, live


def test_cancel_and_errors_are_one_line_with_exit_1():
    store = new_store()
    handle = submit(cli_asks, "bob", store=store)
    code, out = _runs("cancel", handle.id, "--store", str(store.path))
    assert code == 0 and "cancel requested" in out
    drive(store)
    assert RunStore(store).get(handle.id).status == "cancelled"
    code, out = _runs("answer", handle.id, "yes", "--store", str(store.path))
    assert code == 1 and "not waiting for an answer" in out
    code, out = _runs("show", "run_nope", "--store", str(store.path))
    assert code == 1 and "no run 'run_nope'" in out


def test_resume_queues_a_failed_run_again_and_its_finished_steps_replay():
    _CODE["broken"], _LABELS_PRINTED[:] = True, []
    store = new_store()
    path = str(store.path)
    handle = submit(cli_ships, "o-7", store=store)
    drive(store)
    journal = RunStore(store)
    assert journal.get(handle.id).status == "failed"

    _CODE["broken"] = False  # the fix is deployed
    code, out = _runs("resume", handle.id, "--store", path)
    assert (code, out.strip()) == (0, f"{handle.id} queued (queued)")
    code, out = _runs("ls", "--store", path, "--json")
    listed = json.loads(out)[0]
    assert (listed["status"], listed["waiting"]) == (
        "queued",
        "waiting for a worker that imports 'cli_ships'",
    )
    drive(store)
    record = journal.get(handle.id)
    assert (record.status, record.result, record.attempt) == ("completed", "label-o-7 shipped", 2)
    assert _LABELS_PRINTED == ["o-7"]  # the label printed before the failure was not printed again
    code, out = _runs("show", handle.id, "--store", path)
    assert code == 0 and "run:resumed" in out


def test_resume_wakes_a_parked_run_now_and_its_durable_sleep_keeps_its_deadline():
    store = new_store()
    path = str(store.path)
    handle = submit(cli_naps, store=store)
    drive(store)
    journal = RunStore(store)
    parked = journal.get(handle.id)
    assert parked.status == "parked" and parked.wake_at > time.time() + 3000

    code, out = _runs("resume", handle.id, "--store", path, "--json")
    assert code == 0, out
    woken = json.loads(out)
    assert (woken["id"], woken["status"], woken["wake_at"]) == (handle.id, "parked", 0.0)
    drive(store)  # the body runs again now: its step replays and the sleep parks it again
    again = journal.get(handle.id)
    assert (again.status, again.attempt, again.wake_at) == ("parked", 2, parked.wake_at)
    kinds = [e.type for e in journal.events(handle.id)]
    assert (kinds.count("step:done"), kinds.count("sleep")) == (1, 1)


def test_resume_refuses_a_run_that_cannot_resume_with_one_line_and_exit_1(tmp_path: Path):
    _CODE["broken"] = True
    store = new_store()
    path = str(store.path)
    done = submit(cli_asks, "cy", store=store)
    unkept = submit(cli_ships, "o-8", store=store, capture="metadata")
    drive(store)
    answer(done.id, {"decision": "go"}, store=store)
    drive(store)
    journal = RunStore(store)
    assert (journal.get(done.id).status, journal.get(unkept.id).status) == ("completed", "failed")

    code, out = _runs("resume", done.id, "--store", path)
    assert (code, out.strip()) == (
        1,
        f"error: run {done.id} is completed; only parked or failed runs resume",
    )
    code, out = _runs("resume", unkept.id, "--store", path)
    assert code == 1 and "kept no input (capture=metadata); resubmit it" in out
    assert journal.get(unkept.id).status == "failed"  # left as it was
    code, out = _runs("resume", "run_nope", "--store", path, "--json")
    assert code == 1 and json.loads(out)["error"] == "RunNotFound"
    assert "run_nope" in json.loads(out)["message"]
    code, out = _runs("resume", done.id, "--store", str(tmp_path / "no-store"))
    assert code == 1 and out.startswith("error: no Pyrula store at ") and "no-store" in out
