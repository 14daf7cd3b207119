"""`ctx.emit` and `ctx.send_signal`: each is written once, whatever the run goes through (a
replay, a SIGKILLed worker, a cancel), and each is a cancel boundary.

The runs here execute in real `pyrula worker` processes (`tests.runtime.worker_app`'s `reports`);
the run `reports` signals (`awaits_poke`) is in a module only the last worker imports, so the
first one executes its run alone and journals through its fact log, as a lone run does.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pyrula.errors import RunNotFound
from pyrula.journal.store import Store
from pyrula.runtime import RunStore, answer, cancel, fork, submit
from pyrula.runtime.fact_log import read_logged
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.clock import wait_until
from tests.runtime.support import WorkerProcess, drive, new_store

OTHER_APP = "tests.runtime.other_worker_app"


class Setup:
    """A store holding a parked `awaits_poke` run, the effects log and the gates folder."""

    def __init__(self, tmp_path: Path) -> None:
        self.store_path = tmp_path / "store"
        self.effects = tmp_path / "effects.log"
        self.gates = tmp_path / "gates"
        self.effects.touch()
        self.gates.mkdir()
        self.store = Store(self.store_path)
        self.journal = RunStore(self.store)
        self.target = submit("awaits_poke", store=self.store).id
        finish(self.store_path, OTHER_APP)  # it parks, waiting for `poke`
        assert self.journal.get(self.target).status == "parked"

    def submit(self, before: list[str], after: list[str]) -> str:
        args = (str(self.effects), str(self.gates), self.target, before, after)
        return submit("reports", *args, store=self.store).id

    def started(self) -> Counter[str]:
        return Counter(self.effects.read_text().splitlines())

    def events(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        return [e.payload for e in self.journal.events(run_id) if e.type == kind]


@pytest.fixture
def setup(tmp_path: Path):
    made = Setup(tmp_path)
    yield made
    made.store.close()


def finish(store_path: Path, module: str = "tests.runtime.worker_app") -> None:
    """A worker that executes every runnable run of `module`'s workflows, then exits."""
    worker = WorkerProcess(store_path, "--until-idle", module=module)
    try:
        assert worker.exit_code() == 0, worker.stderr
    finally:
        worker.kill()


def kill_inside_step(setup: Setup) -> None:
    """A real worker executes until step `s0` has started, then is SIGKILLed inside it."""
    worker = WorkerProcess(setup.store_path)
    try:
        wait_until(lambda: setup.started()["start 0"] == 1, "step s0 to start")
        worker.send(signal.SIGKILL)
        assert worker.exit_code() == -signal.SIGKILL
    finally:
        worker.kill()


def durable(setup: Setup, run_id: str, kind: str) -> list[dict[str, Any]]:
    """The `kind` facts of `run_id` that survived a kill: in the store or in the killed
    worker's fact log (which the next worker puts in the store before it resumes the run; a
    fact can be in both, once by its number)."""
    logged = [fact.event for fact in read_logged(setup.store_path) if fact.run_id == run_id]
    by_seq = {e.seq: e for e in [*setup.journal.events(run_id), *logged]}
    return [by_seq[seq].payload for seq in sorted(by_seq) if by_seq[seq].type == kind]


@pytest.mark.slow
def test_after_a_sigkill_each_emit_and_signal_is_journaled_once(setup):
    """Emit, signal, emit, then a step the worker is killed inside. A second worker resumes the
    run: it replays the two emits and the signal (writing and sending nothing again), runs the
    step again whole and emits the last event live."""
    run_id = setup.submit(["emit", "send", "emit"], ["emit"])
    kill_inside_step(setup)
    # What the killed attempt made durable: both emits and the one signal, nothing after.
    assert [p["data"] for p in durable(setup, run_id, "emit")] == [{"n": 0}, {"n": 2}]
    assert len(durable(setup, run_id, "signal:sent")) == 1
    assert [p["payload"] for p in setup.events(setup.target, "signal")] == [
        {"from": run_id, "n": 1}
    ]

    (setup.gates / "0").touch()
    finish(setup.store_path)
    record = setup.journal.get(run_id)
    assert (record.status, record.result, record.attempt) == ("completed", "reported", 2)
    emits = setup.events(run_id, "emit")
    assert [(e["kind"], e["data"]) for e in emits] == [
        ("progress", {"n": 0}),
        ("progress", {"n": 2}),
        ("progress", {"n": 4}),
    ]
    assert [e["position"] for e in emits] == ["main/emit0", "main/emit1", "main/emit2"]
    sent = setup.events(run_id, "signal:sent")
    assert [(s["position"], s["to"], s["name"]) for s in sent] == [
        ("main/send0", setup.target, "poke")
    ]
    assert setup.started() == {"start 0": 2, "done 0": 1}  # cut short, then run again whole

    finish(setup.store_path, OTHER_APP)  # the signalled run got one signal, and returns it
    target = setup.journal.get(setup.target)
    assert (target.status, target.result) == ("completed", {"from": run_id, "n": 1})
    assert len(setup.events(setup.target, "signal")) == 1


@pytest.mark.slow
def test_a_cancel_while_a_killed_run_waits_for_its_next_worker_ends_it_without_repeats(setup):
    """A cancel asked while no worker holds the run is seen before the body is entered again:
    the next attempt ends cancelled, and no emit, signal or step runs again."""
    run_id = setup.submit(["emit", "send"], ["emit"])
    kill_inside_step(setup)
    cancel(run_id, store=setup.store)
    (setup.gates / "0").touch()
    finish(setup.store_path)
    assert setup.journal.get(run_id).status == "cancelled"
    assert [e["data"] for e in setup.events(run_id, "emit")] == [{"n": 0}]
    assert len(setup.events(run_id, "signal:sent")) == 1
    assert len(setup.events(setup.target, "signal")) == 1
    assert setup.started() == {"start 0": 1}


@pytest.mark.slow
@pytest.mark.parametrize("after", [["emit", "send"], ["send", "emit"]])
def test_a_cancel_during_a_step_stops_the_run_at_the_next_emit_or_signal(setup, after):
    """A step in flight when the cancel arrives finishes and is journaled; the emit or signal
    after it is a boundary, so neither it nor anything later is written or sent."""
    run_id = setup.submit([], after)
    worker = WorkerProcess(setup.store_path, "--until-idle")
    try:
        wait_until(lambda: setup.started()["start 0"] == 1, "step s0 to start")
        cancel(run_id, store=setup.store)
        (setup.gates / "0").touch()
        assert worker.exit_code() == 0, worker.stderr
    finally:
        worker.kill()
    record = setup.journal.get(run_id)
    assert record.status == "cancelled"
    assert [e["name"] for e in setup.events(run_id, "step:done")] == ["s0"]
    assert setup.events(run_id, "emit") == []
    assert setup.events(run_id, "signal:sent") == []
    assert setup.events(setup.target, "signal") == []
    assert setup.journal.get(setup.target).status == "parked"  # still waiting: never signalled


# -- in-process, on each backend ------------------------------------------------------------------


@workflow(name="signals_nobody")
async def signals_nobody(ctx: WorkflowContext, to: str) -> str:
    await ctx.emit("progress", {"n": 0})
    await ctx.send_signal(to, "poke")
    return "sent"


@pytest.mark.usefixtures("each_backend")
def test_a_signal_to_no_such_run_fails_the_run_and_journals_no_send():
    """The signal and the sender's `signal:sent` are one commit: when the delivery fails, the
    sender journals no send, and the facts before it are kept."""
    store = new_store()
    handle = submit(signals_nobody, "run_nope", store=store)
    drive(store)
    journal = RunStore(store)
    record = journal.get(handle.id)
    assert record.status == "failed"
    assert record.error is not None and record.error["type"] == RunNotFound.__name__
    kinds = [e.type for e in journal.events(handle.id)]
    assert "signal:sent" not in kinds and kinds.count("emit") == 1


@workflow(name="emits_then_asks")
async def emits_then_asks(ctx: WorkflowContext, to: str) -> Any:
    await ctx.emit("progress", {"n": 0})
    await ctx.send_signal(to, "poke", "once")
    return await ctx.interrupt("go on?")


@workflow(name="waits_for_poke_here")
async def waits_for_poke_here(ctx: WorkflowContext) -> Any:
    return await ctx.wait_signal("poke")


@pytest.mark.usefixtures("each_backend")
def test_a_resumed_run_replays_its_emit_and_signal_without_writing_them_again():
    """Parked after its emit and signal, then answered: the next attempt replays both."""
    store = new_store()
    target = submit(waits_for_poke_here, store=store)
    drive(store)
    handle = submit(emits_then_asks, target.id, store=store)
    drive(store)  # emits, signals (the target wakes and returns), parks on the question
    journal = RunStore(store)
    assert journal.get(target.id).result == "once"
    answer(handle.id, "yes", store=store)
    drive(store)
    record = journal.get(handle.id)
    assert (record.status, record.result, record.attempt) == ("completed", "yes", 2)
    kinds = Counter(e.type for e in journal.events(handle.id))
    assert (kinds["emit"], kinds["signal:sent"]) == (1, 1)
    assert [e.type for e in journal.events(target.id)].count("signal") == 1


@pytest.mark.usefixtures("each_backend")
def test_a_fork_past_a_signal_replays_it_and_sends_nothing_again():
    """A what-if branch seeded past the emit and the send replays both: the target still has
    one signal, and the branch goes live only from the question on."""
    store = new_store()
    target = submit(waits_for_poke_here, store=store)
    drive(store)
    handle = submit(emits_then_asks, target.id, store=store)
    drive(store)
    journal = RunStore(store)
    sent = next(e for e in journal.events(handle.id) if e.type == "signal:sent")
    branch = fork(handle.id, sent.seq, store=store)
    drive(store)
    assert journal.get(branch.id).status == "parked"  # it asks its question live
    kinds = Counter(e.type for e in journal.events(branch.id))
    assert (kinds["emit"], kinds["signal:sent"], kinds["interrupt"]) == (1, 1, 1)
    assert [e.type for e in journal.events(target.id)].count("signal") == 1


@workflow(name="signals_itself")
async def signals_itself(ctx: WorkflowContext) -> Any:
    await ctx.send_signal(ctx.run_id, "go", {"n": 1})
    return await ctx.wait_signal("go")


@pytest.mark.usefixtures("each_backend")
def test_a_signal_sent_while_its_receiver_runs_is_not_lost_when_it_then_waits():
    """The signal lands in a running run's journal, which its attempt read before: the run
    parks on the wait, and is due again at once since the signal it waits for is there."""
    store = new_store()
    handle = submit(signals_itself, store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert (record.status, record.result) == ("completed", {"n": 1})
    kinds = [e.type for e in RunStore(store).events(handle.id)]
    assert (kinds.count("signal"), kinds.count("signal:sent"), kinds.count("run:parked")) == (
        1,
        1,
        1,
    )


@workflow(name="busy_then_waits")
async def busy_then_waits(ctx: WorkflowContext, started: str, gate: str) -> Any:
    await ctx.step("busy", _mark_then_wait, started, gate)
    return await ctx.wait_signal("go")


@workflow(name="signals_a_busy_run")
async def signals_a_busy_run(ctx: WorkflowContext, to: str, started: str, gate: str) -> None:
    await ctx.step("until_busy", _mark_then_wait, None, started)
    await ctx.send_signal(to, "go", "hello")
    await ctx.step("open", Path(gate).touch)


async def _mark_then_wait(mark: str | None, until: str) -> None:
    if mark is not None:
        Path(mark).touch()
    while not Path(until).exists():
        await asyncio.sleep(0.005)


@pytest.mark.usefixtures("each_backend")
def test_a_signal_from_another_run_while_the_receiver_is_in_a_step_wakes_it(tmp_path):
    """One worker executes both: the receiver is inside a step (its attempt has read its
    journal) when the sender's signal lands, and only then waits for it."""
    store = new_store()
    started, gate = str(tmp_path / "started"), str(tmp_path / "gate")
    receiver = submit(busy_then_waits, started, gate, store=store)
    sender = submit(signals_a_busy_run, receiver.id, started, gate, store=store)
    drive(store)
    journal = RunStore(store)
    assert journal.get(sender.id).status == "completed"
    record = journal.get(receiver.id)
    assert (record.status, record.result) == ("completed", "hello")
    assert [e.type for e in journal.events(receiver.id)].count("run:parked") == 1
