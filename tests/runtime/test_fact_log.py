"""A run's facts appended to the fact log while its worker executes it alone (`fact_log`):
durable at once, in the store in order when the attempt ends, recovered after a SIGKILL, fenced
by the lease, never put in the store twice."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, Worker, fact_log, submit
from pyrula.runtime import signal as send_signal
from pyrula.runtime.client import RunHandle
from pyrula.runtime.fact_log import read_logged
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.clock import wait_until
from tests.fakes.store_faults import fail_writes
from tests.runtime.support import drive, kill_worker_at, new_store
from tests.runtime.worker_app import FAST_HANG_AT, FAST_STEPS

SEEN: dict[str, list[int]] = {}


def _in_order_once(events: list) -> None:
    """Every event once, numbered 1, 2, 3 ... with no gap."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    steps = [e.payload["name"] for e in events if e.type == "step:done"]
    assert len(steps) == len(set(steps))


def _run_to_the_end(store: Store, action: str, n: int, status: str) -> tuple[RunHandle, list]:
    """`n` steps doing `action`, run by a worker here to `status`, its events each once and in
    order: the run and its events."""
    handle = submit(steps, store.location, action, n, store=store)
    drive(store)
    assert handle.record.status == status, handle.record.error
    events = RunStore(store).events(handle.id)
    _in_order_once(events)
    return handle, events


def _logs(store: Store) -> list[Path]:
    return sorted((Path(store.location) / "facts").glob("*"))


# -- one run, alone on its worker -------------------------------------------------------------


def _look(store_path: str, run_id: str, i: int) -> None:
    """Note how many of the run's steps another reader of the store sees now."""
    other = RunStore(Store(store_path))
    SEEN.setdefault(run_id, []).append(
        sum(1 for e in other.events(run_id) if e.type == "step:done")
    )


def _poke(store_path: str, run_id: str, i: int) -> None:
    if i == 5:  # while steps 0-4 wait in the log: the signal takes a number they will need
        send_signal(run_id, "poke", {"at": i}, store=Store(store_path))


def _terminate(store_path: str, run_id: str, i: int) -> None:
    SEEN.setdefault(run_id, []).append(i)
    if i == 5:  # the run is ended from outside: its lease is gone
        RunStore(Store(store_path)).terminate(run_id)


def _copy_at(store_path: str, run_id: str, i: int) -> None:
    if i == 6:  # steps 0-5 wait in the log: copy the store as a crash would leave it
        copies = Path(store_path).parent / f"{Path(store_path).name}-crashed"
        shutil.copytree(store_path, copies, ignore=shutil.ignore_patterns("lock.mdb"))


def _cancel_from_the_shell(store_path: str, run_id: str, i: int) -> None:
    SEEN.setdefault(run_id, []).append(i)
    if i == 5:  # another process asks the run to stop, as `pyrula runs cancel` does
        command = [sys.executable, "-m", "pyrula.cli.app", "runs", "cancel", run_id]
        subprocess.run([*command, "--store", store_path], check=True, capture_output=True)


def _count(store_path: str, run_id: str, i: int) -> None:
    SEEN.setdefault("ran", []).append(i)


def _note(store_path: str, run_id: str, i: int) -> None:
    SEEN.setdefault("order", []).append(run_id)


def _note_and_submit(store_path: str, run_id: str, i: int) -> None:
    _note(store_path, run_id, i)
    if i == 0:  # a second run is queued while this one executes alone, logging its facts
        SEEN["second"] = [submit(steps, store_path, "note", 20, store=Store(store_path)).id]


ACTIONS = {
    "look": _look,
    "poke": _poke,
    "terminate": _terminate,
    "copy": _copy_at,
    "note": _note,
    "count": _count,
    "cancel from the shell": _cancel_from_the_shell,
    "note and submit": _note_and_submit,
}


def _step(store_path: str, run_id: str, action: str, i: int) -> int:
    ACTIONS[action](store_path, run_id, i)
    return i


@workflow(name="fact_log.steps")
async def steps(ctx: WorkflowContext, store_path: str, action: str, n: int) -> int:
    """`n` steps, each doing `action` before it returns its index."""
    total = 0
    for i in range(n):
        total += await ctx.step(f"s{i}", _step, store_path, ctx.run_id, action, i)
    return total


def test_a_lone_runs_facts_are_logged_then_in_the_store_in_order(monkeypatch):
    monkeypatch.setattr(fact_log, "FOLD_SECONDS", 3600.0)
    store = new_store()
    handle = submit(steps, store.location, "look", 8, store=store)
    drive(store)
    assert handle.record.status == "completed" and handle.record.result == sum(range(8))
    # Past the first DIRECT_FACTS (none by default), its facts waited in the log while it ran.
    seen = SEEN[handle.id]
    assert seen[: fact_log.DIRECT_FACTS + 1] == list(range(fact_log.DIRECT_FACTS + 1))
    assert seen[-1] == fact_log.DIRECT_FACTS
    events = RunStore(store).events(handle.id)
    _in_order_once(events)
    assert [e.type for e in events][-1] == "run:done"
    assert sum(1 for e in events if e.type == "step:done") == 8
    assert _logs(store) == []  # the log went with the attempt


def test_logged_facts_are_seen_by_others_within_the_fold_time(monkeypatch):
    monkeypatch.setattr(fact_log, "FOLD_SECONDS", 0.2)
    store = new_store()

    @workflow(name="fact_log.waits_to_be_seen")
    async def waits(ctx: WorkflowContext) -> int:
        for i in range(5):
            await ctx.step(f"s{i}", lambda i=i: i)
        other = RunStore(Store(store.location))
        # The body goes on only once another reader sees all five: the timer put them there.
        await ctx.to_thread(
            wait_until,
            lambda: sum(1 for e in other.events(ctx.run_id) if e.type == "step:done") == 5,
            "another reader to see the five logged steps",
        )
        return 5

    handle = submit(waits, store=store)
    drive(store)
    assert handle.record.status == "completed", handle.record.error
    _in_order_once(RunStore(store).events(handle.id))


def test_a_logging_run_leaves_the_loop_to_a_run_that_starts_beside_it():
    """Each logged fact yields to the worker's loop as a commit's wait does: a second run
    claimed meanwhile starts at once (and the two then share group commits), rather than
    waiting for the first to end."""
    store = new_store()
    first = submit(steps, store.location, "note and submit", 200, store=store)
    asyncio.run(Worker(store, poll_seconds=0.005, concurrency=2).run(until_idle=True))
    (second,) = SEEN["second"]
    assert {RunStore(store).get(run).status for run in (first.id, second)} == {"completed"}
    order = SEEN["order"]
    assert order.index(second) < len(order) - 1 - order[::-1].index(first.id)


# -- an outside fact, a lost lease ------------------------------------------------------------


def test_a_signal_sent_while_facts_are_logged_is_kept_and_nothing_twice(monkeypatch):
    monkeypatch.setattr(fact_log, "FOLD_SECONDS", 3600.0)
    store = new_store()
    _, events = _run_to_the_end(store, "poke", 10, "completed")
    signals = [e.payload for e in events if e.type == "signal"]
    assert signals == [{"name": "poke", "payload": {"at": 5}}]
    assert sum(1 for e in events if e.type == "step:done") == 10


def test_facts_logged_by_an_attempt_that_lost_its_lease_are_not_put_in_the_store(
    monkeypatch, caplog
):
    monkeypatch.setattr(fact_log, "FOLD_SECONDS", 3600.0)
    store = new_store()
    handle, events = _run_to_the_end(store, "terminate", 10, "cancelled")
    assert events[-1].type == "run:cancelled"  # nothing of the old attempt after it
    assert SEEN[handle.id] == list(range(6))  # it stopped at the next step
    assert "lost its lease" in caplog.text
    assert _logs(store) == []


@pytest.mark.slow
def test_a_full_disk_under_the_log_leaves_the_run_to_resume_keeping_what_was_logged(
    monkeypatch, caplog
):
    store = new_store()
    write, appended = os.pwrite, []

    def full_after_four(fd: int, data: bytes, offset: int) -> int:
        if "/facts/" in os.readlink(f"/proc/self/fd/{fd}") and offset:
            appended.append(offset)
            if len(appended) > 4:  # the fifth fact finds the disk full
                raise OSError(errno.ENOSPC, "No space left on device")
        return write(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full_after_four)
    handle = submit(steps, store.location, "count", 8, store=store)
    asyncio.run(Worker(store, poll_seconds=0.005, lease_seconds=4).run(max_runs=1))
    assert handle.record.status == "running"  # not failed: left to be resumed
    assert "left to be resumed" in caplog.text and "fact log" in caplog.text
    monkeypatch.undo()  # space is back: the run is resumed once its lease lapses
    drive(store)
    assert handle.record.status == "completed"
    # run:attempt and steps 0-2 were logged (so not done again); step 3 met the full disk.
    assert SEEN["ran"] == [0, 1, 2, 3, 3, 4, 5, 6, 7]
    _in_order_once(RunStore(store).events(handle.id))


def test_a_cancel_from_another_process_is_seen_at_the_next_step_while_facts_are_logged():
    """A run whose facts go to the log commits nothing between its steps, so its cancel check
    reads the flag only when the store's commit count has moved: a cancel is a commit."""
    store = new_store()
    handle, events = _run_to_the_end(store, "cancel from the shell", 10, "cancelled")
    assert SEEN[handle.id] == list(range(6))
    assert sum(1 for e in events if e.type == "step:done") == 6  # logged, then committed


def test_opening_runs_on_a_full_disk_leaves_a_stopped_log_for_later(monkeypatch, caplog):
    store = new_store()
    handle = submit(steps, store.location, "copy", 8, store=store)
    drive(store)
    crashed = Store(f"{store.location}-crashed")  # steps 0-5 only in a stopped worker's log
    fail_writes(monkeypatch, crashed)
    runs = RunStore(crashed)  # opens, for reading at least: the facts wait
    assert "wait in" in caplog.text
    assert len(_logs(crashed)) == 1 and runs.events(handle.id)[-1].type == "run:submitted"
    monkeypatch.undo()
    assert fact_log.recover(crashed) == 7  # run:attempt and steps 0-5, once there is room
    assert _logs(crashed) == []


# -- a killed worker, a replayed log, a torn one ----------------------------------------------


@pytest.mark.slow
def test_a_killed_workers_logged_facts_are_taken_by_the_next_and_not_done_again(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PYRULA_TEST_NO_TIMED_FOLD", "1")
    store_path, effects, hang = tmp_path / "store", tmp_path / "effects", tmp_path / "hang"
    effects.touch()
    hang.touch()
    store = Store(store_path)
    handle = RunHandle(
        submit("fast_steps", str(effects), str(hang), store=store).id, RunStore(store)
    )
    kill_worker_at(store_path, effects, FAST_HANG_AT)
    # Steps past the first DIRECT_FACTS are durable only in the killed worker's log.
    logged = [f.event.payload["name"] for f in read_logged(store_path) if "name" in f.event.payload]
    assert logged == [f"s{i}" for i in range(fact_log.DIRECT_FACTS, FAST_HANG_AT)]
    committed = [e for e in RunStore(store).events(handle.id) if e.type == "step:done"]
    assert len(committed) == fact_log.DIRECT_FACTS
    hang.unlink()
    drive(store)  # takes the run over (its dead worker's lease): the log's facts go in first
    assert handle.record.status == "completed"
    assert handle.record.result == sum(range(FAST_STEPS))
    ran = effects.read_text().splitlines()
    assert sorted(set(ran)) == sorted(f"step {i}" for i in range(FAST_STEPS))
    assert ran.count(f"step {FAST_HANG_AT}") == 2  # cut short by the kill, so run again
    assert len(ran) == FAST_STEPS + 1  # and nothing else twice
    _in_order_once(RunStore(store).events(handle.id))
    assert [p.suffix for p in _logs(store)] == []


def _crashed_copy(monkeypatch) -> tuple[RunHandle, Path, Path]:
    """A run of 8 steps to its end, and the copy its step 6 made of the store: as of step 6, its
    log holding steps 0-5, whose process is gone. The run, the copy and that log."""
    monkeypatch.setattr(fact_log, "FOLD_SECONDS", 3600.0)
    store = new_store()
    crashed = Path(f"{store.location}-crashed")
    handle = submit(steps, store.location, "copy", 8, store=store)
    drive(store)
    assert handle.record.status == "completed"
    (log,) = _logs(Store(crashed))
    return handle, crashed, log


def test_a_stopped_log_is_put_in_the_store_once_and_up_to_a_torn_entry(tmp_path, monkeypatch):
    handle, crashed, log = _crashed_copy(monkeypatch)
    torn = tmp_path / "torn"
    shutil.copytree(crashed, torn)
    data = log.read_bytes()
    (torn / "facts" / log.name).write_bytes(data[: data.rindex(b"s5") + 1])  # cut in step 5
    reopened = RunStore(Store(crashed))  # opening the runs takes a stopped worker's facts
    done = [e.payload["name"] for e in reopened.events(handle.id) if e.type == "step:done"]
    assert done == [f"s{i}" for i in range(6)]
    _in_order_once(reopened.events(handle.id))
    assert _logs(Store(crashed)) == []
    assert fact_log.recover(reopened.store) == 0  # nothing left to take, nothing twice
    partial = RunStore(Store(torn))
    done = [e.payload["name"] for e in partial.events(handle.id) if e.type == "step:done"]
    assert done == [f"s{i}" for i in range(5)]  # up to the torn entry


def test_a_stopped_log_whose_rename_a_crash_undid_is_put_in_the_store(monkeypatch):
    # The folder is not flushed for a log's rename from `*.new`: a crash may undo it.
    handle, crashed, log = _crashed_copy(monkeypatch)
    undone = log.rename(log.with_suffix(".new"))
    an_hour_ago = time.time() - 3600
    os.utime(undone, (an_hour_ago, an_hour_ago))
    reopened = RunStore(Store(crashed))
    done = [e.payload["name"] for e in reopened.events(handle.id) if e.type == "step:done"]
    assert done == [f"s{i}" for i in range(6)]
    _in_order_once(reopened.events(handle.id))
    assert _logs(Store(crashed)) == []
