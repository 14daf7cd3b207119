"""`pyrula runs ...`: list, show, answer, cancel, resume and fork runs from the shell."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pyrula.cli.app import app
from pyrula.runtime import RunStore, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.runtime.support import drive, new_store


@workflow(name="cli_asks")
async def cli_asks(ctx: WorkflowContext, who: str) -> str:
    first = await ctx.step("greet", lambda: f"hello {who}")
    reply = await ctx.interrupt("proceed?")
    return f"{first}; {reply['decision']}"


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
