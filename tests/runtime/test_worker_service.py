"""`pyrula worker` behaves like a service: it drains on Ctrl-C and SIGTERM and hands its runs
to the next worker, leaves runs it cannot execute queued, and logs one line per run event.

Every test drives real `pyrula worker` processes and real signals; they synchronise on files
and on the store, never on sleeps.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pyrula.cli.app import app
from pyrula.errors import RunAttemptEnded
from pyrula.journal.store import Store
from pyrula.runtime import RunStore, Worker, answer, cancel, submit
from pyrula.runtime.runstore import Lease
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.clock import wait_until
from tests.runtime.support import WorkerProcess

pytestmark = pytest.mark.slow

STEPS = 3
# The drain's own log line. Not the bare word "draining": every worker's first line names its
# store, whose path holds the test's name, so a test named for draining would match at once,
# before its signal was even handled.
DRAINING = "draining: claiming no more runs"


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """Worker processes a test starts; any still running at its end is killed."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.kill()


def _start(started: list[WorkerProcess], store: Path, *flags: str) -> WorkerProcess:
    worker = WorkerProcess(store, *flags)
    started.append(worker)
    return worker


class Gated:
    """A `gated` run: step i blocks until the test creates `gates/<i>`; `effects` counts each
    step's start and end."""

    def __init__(self, tmp_path: Path, store: Store, open_gates: int) -> None:
        self.effects = tmp_path / "effects.log"
        self.effects.touch()
        self.gates = tmp_path / "gates"
        self.gates.mkdir()
        for i in range(open_gates):
            self.open(i)
        self.handle = submit("gated", str(self.effects), str(self.gates), STEPS, store=store)

    def open(self, i: int) -> None:
        (self.gates / str(i)).touch()

    def lines(self) -> Counter[str]:
        return Counter(self.effects.read_text().splitlines())

    def started(self, i: int) -> bool:
        return f"start {i}" in self.lines()


def _event_types(journal: RunStore, run_id: str) -> list[str]:
    return [event.type for event in journal.events(run_id)]


def _runs(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["runs", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def _resume_elsewhere(
    workers: list[WorkerProcess], store_path: Path, run: Gated, journal: RunStore
) -> None:
    """A second worker takes the released run over at once and completes it; no step that had
    finished runs again, and the step the drain cut short runs once more, whole."""
    for i in range(STEPS):
        run.open(i)
    second = _start(workers, store_path, "--until-idle")
    assert second.exit_code() == 0, second.stderr
    record = journal.get(run.handle.id)
    assert record.status == "completed", record.error
    assert record.result == sum(range(STEPS))
    assert record.attempt == 2
    assert f'{run.handle.id} "gated" attempt 2 resumed' in second.stderr
    lines = run.lines()
    assert lines["start 0"] == lines["done 0"] == 1  # finished before the drain: not repeated
    assert lines["start 1"] == 2 and lines["done 1"] == 1  # cut short, then run whole once
    assert lines["start 2"] == lines["done 2"] == 1


def _assert_released(journal: RunStore, run_id: str) -> None:
    """Back in the queue with no lease and no outcome; the journal keeps the finished step."""
    record = journal.get(run_id)
    assert record.status == "queued" and record.lease is None and record.error is None
    types = _event_types(journal, run_id)
    assert types[-1] == "run:released"
    assert types.count("step:done") == 1
    assert not {"run:done", "run:error", "run:cancelled", "run:parked", "step:error"} & set(types)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_worker_drains_then_releases_its_run_to_the_next_worker(
    tmp_path, workers, stop_signal
):
    store_path = tmp_path / "store"
    store = Store(store_path)
    journal = RunStore(store)
    run = Gated(tmp_path, store, open_gates=1)
    first = _start(workers, store_path, "--grace", "0.2")
    wait_until(lambda: run.started(1), "step 1 to start")

    first.send(stop_signal)
    first.wait_for(DRAINING)
    assert first.exit_code() == 0, first.stderr
    assert f'{run.handle.id} "gated" attempt 1 released' in first.stderr
    _assert_released(journal, run.handle.id)

    _resume_elsewhere(workers, store_path, run, journal)


def test_a_draining_worker_hands_a_run_off_at_its_next_boundary(tmp_path, workers):
    store_path = tmp_path / "store"
    store = Store(store_path)
    journal = RunStore(store)
    run = Gated(tmp_path, store, open_gates=1)
    first = _start(workers, store_path, "--grace", "3600")
    wait_until(lambda: run.started(1), "step 1 to start")

    first.send(signal.SIGINT)
    first.wait_for(DRAINING)
    run.open(1)  # the step in flight finishes; the next step is the boundary
    assert first.exit_code() == 0, first.stderr  # long before the hour of grace is up
    assert f'{run.handle.id} "gated" attempt 1 released' in first.stderr
    assert "start 2" not in run.lines()  # not begun by the draining worker
    record = journal.get(run.handle.id)
    assert record.status == "queued" and record.lease is None
    assert _event_types(journal, run.handle.id).count("step:done") == 2

    run.open(2)
    second = _start(workers, store_path, "--until-idle")
    assert second.exit_code() == 0, second.stderr
    assert journal.get(run.handle.id).result == sum(range(STEPS))
    assert run.lines() == Counter(
        {f"{half} {i}": 1 for half in ("start", "done") for i in range(3)}
    )


def test_a_second_ctrl_c_releases_at_once(tmp_path, workers):
    store_path = tmp_path / "store"
    store = Store(store_path)
    journal = RunStore(store)
    run = Gated(tmp_path, store, open_gates=1)
    # A grace longer than the test's own timeouts: only the second Ctrl-C can end the worker.
    first = _start(workers, store_path, "--grace", "3600")
    wait_until(lambda: run.started(1), "step 1 to start")

    first.send(signal.SIGINT)
    first.wait_for(DRAINING)
    first.send(signal.SIGINT)
    assert first.exit_code(timeout=60) == 0, first.stderr
    assert "releasing 1 run(s) now" in first.stderr
    _assert_released(journal, run.handle.id)

    _resume_elsewhere(workers, store_path, run, journal)


def test_a_run_whose_last_step_ends_within_the_grace_completes_normally(tmp_path, workers):
    store_path = tmp_path / "store"
    store = Store(store_path)
    journal = RunStore(store)
    run = Gated(tmp_path, store, open_gates=2)
    worker = _start(workers, store_path, "--grace", "3600")
    wait_until(lambda: run.started(2), "the last step to start")

    worker.send(signal.SIGINT)
    worker.wait_for(DRAINING)
    run.open(2)  # no boundary is left between this step and the end of the body
    assert worker.exit_code() == 0, worker.stderr
    record = journal.get(run.handle.id)
    assert record.status == "completed" and record.attempt == 1
    assert "run:released" not in _event_types(journal, run.handle.id)
    assert f'{run.handle.id} "gated" attempt 1 completed' in worker.stderr
    assert set(run.lines().values()) == {1}


def test_a_run_of_a_workflow_no_worker_imported_stays_queued_and_is_listed_waiting(
    tmp_path, workers
):
    store_path = tmp_path / "store"
    store = Store(store_path)
    journal = RunStore(store)
    stranger = submit("only_in_other_app", {"order": 7}, store=store)
    known = submit("exactly_once", str(tmp_path / "effects.log"), 3, store=store)

    worker = _start(workers, store_path, "--until-idle")
    # --until-idle ends once the runs it can take are done: the stranger is not its work.
    assert worker.exit_code() == 0, worker.stderr
    assert journal.get(known.id).status == "completed"
    record = journal.get(stranger.id)
    assert (record.status, record.attempt, record.lease) == ("queued", 0, None)
    assert _event_types(journal, stranger.id) == ["run:submitted"]
    assert stranger.id not in worker.stderr

    code, out = _runs("ls", "--store", str(store_path))
    assert code == 0, out
    row = next(line for line in out.splitlines() if stranger.id in line)
    assert "queued" in row and "waiting for a worker that imports 'only_in_other_app'" in row
    code, out = _runs("ls", "--store", str(store_path), "--json")
    listed = {run["id"]: run for run in json.loads(out)}
    assert listed[stranger.id]["status"] == "queued"
    assert listed[stranger.id]["name"] == "only_in_other_app"
    assert "only_in_other_app" in listed[stranger.id]["waiting"]
    assert listed[known.id]["waiting"] is None
    code, out = _runs("show", stranger.id, "--store", str(store_path))
    assert code == 0 and "waiting for a worker that imports 'only_in_other_app'" in out

    # A worker that has the workflow takes the run.
    other = WorkerProcess(store_path, "--until-idle", module="tests.runtime.other_worker_app")
    workers.append(other)
    assert other.exit_code() == 0, other.stderr
    assert journal.get(stranger.id).status == "completed"
    assert journal.get(stranger.id).result == "shipped 7"


def _several_outcomes(tmp_path: Path, store: Store) -> dict[str, Any]:
    """One run of each kind of ending: completed, failed, parked, cancelled."""
    done = submit("exactly_once", str(tmp_path / "effects.log"), 1, store=store)
    failed = submit("fails", store=store)
    parked = submit("asks", store=store)
    cancelled = submit("asks", store=store)
    cancel(cancelled.id, store=store)
    return {"completed": done, "failed": failed, "parked": parked, "cancelled": cancelled}


def test_one_log_line_per_run_event(tmp_path, workers):
    store_path = tmp_path / "store"
    store = Store(store_path)
    runs = _several_outcomes(tmp_path, store)
    worker = _start(workers, store_path, "--until-idle")
    assert worker.exit_code() == 0, worker.stderr
    lines = worker.lines
    for outcome, handle in runs.items():
        mine = [line for line in lines if handle.id in line]
        assert len(mine) == 2, mine  # claimed, then how the attempt ended
        assert mine[0].startswith("INFO:     ") and mine[0].endswith("attempt 1 claimed")
        assert f"attempt 1 {outcome} in " in mine[1]
    failure = next(line for line in lines if runs["failed"].id in line and "failed" in line)
    assert failure.endswith("(ValueError)")

    answer(runs["parked"].id, "yes", store=store)
    again = _start(workers, store_path, "--until-idle")
    assert again.exit_code() == 0, again.stderr
    parked = runs["parked"].id
    assert any(line.endswith(f'{parked} "asks" attempt 2 resumed') for line in again.lines)
    assert any(f'{parked} "asks" attempt 2 completed in ' in line for line in again.lines)


def test_json_log_lines_for_log_shippers(tmp_path, workers):
    store_path = tmp_path / "store"
    store = Store(store_path)
    runs = _several_outcomes(tmp_path, store)
    worker = _start(workers, store_path, "--until-idle", "--json")
    assert worker.exit_code() == 0, worker.stderr
    records = [json.loads(line) for line in worker.lines]  # every line is one JSON object
    assert records[0]["event"] == "started" and "exactly_once" in records[0]["workflows"]
    assert records[-1]["event"] == "stopped"
    by_run: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if "run" in record:
            by_run.setdefault(record["run"], []).append(record)
    for outcome, handle in runs.items():
        claimed, ended = by_run[handle.id]
        assert claimed["event"] == "claimed" and claimed["status"] == "running"
        assert claimed["duration_ms"] is None
        assert ended["event"] == outcome and ended["status"] == outcome
        assert ended["attempt"] == 1 and ended["duration_ms"] >= 0
        assert ended["workflow"] == journal_name(store, handle.id)
        assert ended["ts"].endswith("Z")
    assert by_run[runs["failed"].id][1]["error"] == "ValueError"
    assert by_run[runs["completed"].id][1]["error"] is None


def journal_name(store: Store, run_id: str) -> str:
    return RunStore(store).get(run_id).name


def test_quiet_prints_no_run_lines_but_still_says_it_is_draining(tmp_path, workers):
    store_path = tmp_path / "store"
    store = Store(store_path)
    runs = _several_outcomes(tmp_path, store)
    worker = _start(workers, store_path, "--until-idle", "--quiet")
    assert worker.exit_code() == 0, worker.stderr
    assert RunStore(store).get(runs["completed"].id).status == "completed"
    assert worker.stderr == ""

    run = Gated(tmp_path, store, open_gates=1)
    quiet = _start(workers, store_path, "--quiet", "--grace", "0.2")
    wait_until(lambda: run.started(1), "step 1 to start")
    quiet.send(signal.SIGINT)
    assert quiet.exit_code() == 0, quiet.stderr
    assert quiet.lines[0].startswith("WARNING:  draining")
    assert not any(run.handle.id in line for line in quiet.lines)


def test_release_hands_the_run_back_once_and_fences_the_attempt_out(tmp_path):
    journal = RunStore(Store(tmp_path / "store"))
    record, _ = journal.submit("gated", {"args": []})
    claimed = journal.claim("worker-a", 30, {"gated"})
    assert claimed is not None and claimed.id == record.id
    lease = Lease("worker-a", claimed.attempt)
    released = journal.release(record.id, lease)
    assert (released.status, released.lease, released.attempt) == ("queued", None, 1)
    events = _event_types(journal, record.id)
    with pytest.raises(RunAttemptEnded):
        journal.release(record.id, lease)  # once only: the attempt no longer holds the run
    with pytest.raises(RunAttemptEnded):
        journal.append(record.id, lease, "step:done", {"position": "0:step:0"})
    assert _event_types(journal, record.id) == events
    again = journal.claim("worker-b", 30, {"gated"})  # claimable at once, no expiry to wait for
    assert again is not None and again.attempt == 2


@workflow(name="svc_swallows_cancel")
async def swallows_cancel(ctx: WorkflowContext) -> str:
    await ctx.step("first", lambda: 1)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        return "swallowed"  # a body that ignores its cancellation must not end the run
    return "unreachable"


def test_a_released_attempt_writes_no_outcome_even_if_its_body_returns(tmp_path):
    store = Store(tmp_path / "store")
    journal = RunStore(store)
    handle = submit(swallows_cancel, store=store)

    async def main() -> None:
        worker = Worker(store, poll_seconds=0.005, grace_seconds=0)
        running = asyncio.ensure_future(worker.run())
        while "step:done" not in _event_types(journal, handle.id):
            await asyncio.sleep(0.005)
        worker.stop()  # no grace: the body is cancelled once, and returns
        await running

    asyncio.run(main())
    record = journal.get(handle.id)
    assert (record.status, record.result, record.lease) == ("queued", None, None)
    assert _event_types(journal, handle.id)[-2:] == ["step:done", "run:released"]
