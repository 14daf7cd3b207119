"""Durable runs: journaled steps per second, and resuming a run killed at step 1,000, vs DBOS.

1. Steps/s. A 100-step workflow (each step returns its index) runs end to end, from submission
   to the finished run, on a fresh store per round. Variants, interleaved round by round with the
   order rotating:

   * pyrula, `Store(path)` (the default: `sync=True`, every fact is on disk before the run goes
     on: a run executing alone appends each to the worker's fact log, one write and one
     fdatasync, and commits them with its closing event; a commit fdatasyncs LMDB's data pages,
     then writes the meta page through an O_DSYNC descriptor);
   * pyrula, `Store(path, sync=False)` (no flush; survives a process kill, not a power cut);
   * DBOS on SQLite with its defaults: DBOS sets only `busy_timeout`, `foreign_keys` and
     IMMEDIATE transactions, so SQLite's own defaults hold: `journal_mode=DELETE` with
     `synchronous=FULL` (the benchmark reads both pragmas back from DBOS's engine and prints them);
   * DBOS on SQLite with `synchronous=OFF` (not its default: the like-for-like peer of the
     `sync=False` row), through a `system_database_engine` that repeats DBOS's own connection
     set-up plus that pragma.
   * for scale, the raw disk: one 100-byte pwrite + fdatasync per "step" (no database). This
     disk's flush latency swings widely from minute to minute (a shared virtual disk), which is
     why the variants are interleaved and the floor is measured in the same rounds.

   Every store lives in a temp dir under one base folder, so all of them are on the same disk.

2. Resume after a kill at step 1,000. A 1,200-step workflow runs in a real worker process whose
   step 1,000 (0-based; the 1,001st step) blocks, so exactly 1,000 steps are journaled when the
   parent, polling the store, SIGKILLs it. That killed attempt journals with fsync off (to keep
   the benchmark short; a killed process loses nothing that reached the page cache). A fresh
   process with the default fsync policy then finishes the run. It records, on the system-wide
   monotonic clock:

   * process start: parent spawns it -> its imports are done (interpreter + imports);
   * fixed recovery: worker start (store open for pyrula, `DBOS(config=...)` for DBOS) -> the
     run's body is re-entered (pyrula: claimed, journal loaded; DBOS: `launch()`, recovery
     re-enqueues the workflow, the queue runner picks it up);
   * per replayed step: body re-entered -> step 1,000 returns, divided by 1,000;
   * the 200 remaining live (fsynced) steps, and spawn -> done in all.

   The same resume is also timed in this process on a copy of the killed pyrula store (no process
   start or import noise; same worker code). DBOS has an equivalent recovery (pending workflows of
   this executor and application version are recovered on `DBOS.launch()`), timed the same way.

The peer's published figures (127-314 steps/s; ~0.7 ms per replayed step plus ~1 s fixed
recovery) are printed for reference with the 10x targets. `--profile` adds cProfile top costs for
1,000 in-process steps (live with fsync, live without, and replayed).

Run: python benchmarks/bench_runs.py [--rounds 5] [--resume-rounds 3] [--dir DIR] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import io
import json
import os
import platform
import pstats
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, Worker, submit
from pyrula.workflows import WorkflowContext, workflow

STEPS = 100  # steps of the throughput workflow
CONCURRENT = 8  # runs at once per worker in the concurrent rows
RESUME_STEPS = 1_200  # steps of the workflow killed and resumed
KILL_AT = 1_000  # steps journaled when the worker is killed
PEER_STEPS_PER_S = (127.0, 314.0)
# How often a worker with a free slot looks at the queue again while its runs execute. The timed
# span does not wait on it (the runs are queued before the worker starts, and it claims them at
# once), but each look is CPU taken from the runs: 1 ms here (the setting before 2026-12-01) cost
# about 30% of a step's CPU; 0.1 s is `Worker`'s default. `--poll` sets it.
POLL_SECONDS = 0.1
PEER_FIXED_S = 1.0
PEER_REPLAY_S = 0.7e-3
WAIT_LIMIT_S = 120.0

# Timestamps (time.monotonic(), one clock for every process on the host) set by the bodies.
MARKS: dict[str, float] = {}
_DONE = threading.Event()
_HANG_AT = -1  # the step index that blocks; set only in a process that is about to be killed


def _value(i: int) -> int:
    if i == _HANG_AT:
        time.sleep(3600)  # the parent kills this process here, with KILL_AT steps journaled
    return i


@workflow(name="bench_runs.steps")
async def pyrula_steps(ctx: WorkflowContext, n: int) -> int:
    MARKS["enter"] = time.monotonic()
    total = 0
    for i in range(n):
        total += await ctx.step(f"s{i}", _value, i)
        if i == KILL_AT - 1:
            MARKS["replayed"] = time.monotonic()
    MARKS["end"] = time.monotonic()
    return total


class _MarkingWorker(Worker):
    """A stock worker that notes when it has claimed the run (before the journal is loaded)."""

    async def execute(self, run: Any) -> None:
        MARKS.setdefault("claimed", time.monotonic())
        await super().execute(run)


_DBOS_APP: SimpleNamespace | None = None


def dbos_app() -> SimpleNamespace:
    """DBOS and the same workflow, imported and registered only where DBOS is measured."""
    global _DBOS_APP
    if _DBOS_APP is None:
        from dbos import DBOS, SetWorkflowID

        # Registered by calling DBOS's decorators (what `@DBOS.step()` does): where dbos is not
        # installed (the lint venv) mypy cannot read their types, and each name keeps its own.
        def dbos_value(i: int) -> int:
            if i == _HANG_AT:
                time.sleep(3600)
            return i

        dbos_value = DBOS.step()(dbos_value)

        def dbos_steps(n: int) -> int:
            MARKS["enter"] = time.monotonic()
            total = 0
            for i in range(n):
                total += dbos_value(i)
                if i == KILL_AT - 1:
                    MARKS["replayed"] = time.monotonic()
            MARKS["end"] = time.monotonic()
            _DONE.set()
            return total

        dbos_steps = DBOS.workflow()(dbos_steps)
        _DBOS_APP = SimpleNamespace(DBOS=DBOS, SetWorkflowID=SetWorkflowID, steps=dbos_steps)
    return _DBOS_APP


def dbos_config(db: Path, *, fsync: bool) -> dict[str, Any]:
    url = f"sqlite:///{db}"
    config: dict[str, Any] = {"name": "bench-runs", "system_database_url": url}
    config["log_level"] = "WARNING"
    if not fsync:
        import sqlalchemy as sa
        from sqlalchemy import event

        engine = sa.create_engine(url)

        def _connect(conn: Any, _record: Any) -> None:
            # What DBOS's own SQLite engine does on connect (_sys_db_sqlite.py), plus no fsync.
            conn.isolation_level = "IMMEDIATE"
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=OFF")

        event.listen(engine, "connect", _connect)  # `@event.listens_for`, as a call

        config["system_database_engine"] = engine
    return config


def dbos_pragmas() -> dict[str, Any]:
    """journal_mode and synchronous as DBOS's own system-database engine sees them."""
    import sqlalchemy as sa
    from dbos._dbos import _get_dbos_instance

    engine = _get_dbos_instance()._sys_db.engine
    with engine.connect() as conn:
        return {
            p: conn.execute(sa.text(f"PRAGMA {p}")).scalar()
            for p in ("journal_mode", "synchronous")
        }


# -- child processes -------------------------------------------------------------------------------


def _emit_marks(**extra: float) -> None:
    print("MARKS " + json.dumps({**MARKS, **extra}), flush=True)


def child(mode: str, args: list[str]) -> None:
    global _HANG_AT
    imported = time.monotonic()
    if mode == "pyrula-fill":  # run until killed; step KILL_AT blocks
        _HANG_AT = KILL_AT
        store = Store(args[0], sync=False)
        asyncio.run(Worker(store, lease_seconds=30, poll_seconds=0.005).run())
    elif mode == "pyrula-resume":
        MARKS["t0"] = time.monotonic()
        store = Store(args[0])  # the default: fsync on every commit
        asyncio.run(
            _MarkingWorker(store, lease_seconds=30, poll_seconds=0.005).run(until_idle=True)
        )
        _emit_marks(imported=imported)
    elif mode == "dbos-fill":
        _HANG_AT = KILL_AT
        app = dbos_app()
        app.DBOS(config=dbos_config(Path(args[0]), fsync=False))
        app.DBOS.launch()
        with app.SetWorkflowID(args[1]):
            app.DBOS.start_workflow(app.steps, RESUME_STEPS)
        time.sleep(3600)
    elif mode == "dbos-resume":
        app = dbos_app()
        imported = time.monotonic()
        MARKS["t0"] = time.monotonic()
        app.DBOS(config=dbos_config(Path(args[0]), fsync=True))  # DBOS's defaults
        app.DBOS.launch()  # recovers this executor's pending workflows
        MARKS["launched"] = time.monotonic()
        if not _DONE.wait(WAIT_LIMIT_S):
            raise SystemExit("DBOS did not finish the recovered workflow")
        result = app.DBOS.retrieve_workflow(args[1]).get_result()
        assert result == sum(range(RESUME_STEPS)), result
        _emit_marks(imported=imported)
        app.DBOS.destroy()
    else:
        raise SystemExit(f"unknown child mode {mode}")


def spawn(mode: str, *args: str | Path, log: Path) -> subprocess.Popen[str]:
    with open(log, "a") as stderr:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", mode, *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )


def wait_for(
    count: Callable[[], int], process: subprocess.Popen[str], log: Path, what: str
) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while count() < KILL_AT:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited early ({process.returncode}):\n{log.read_text()}")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{what} did not reach {KILL_AT} steps:\n{log.read_text()}")
        time.sleep(0.02)


def kill(process: subprocess.Popen[str]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, process.returncode


def marks_of(process: subprocess.Popen[str], log: Path, what: str) -> dict[str, float]:
    try:
        out, _ = process.communicate(timeout=WAIT_LIMIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise RuntimeError(f"{what} timed out:\n{log.read_text()}") from None
    lines = [line for line in out.splitlines() if line.startswith("MARKS ")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"{what} failed ({process.returncode}):\n{out}\n{log.read_text()}")
    marks: dict[str, float] = json.loads(lines[-1][len("MARKS ") :])  # `_emit_marks`'s line
    return marks


# -- 1. steps per second ---------------------------------------------------------------------------


def _no_mark() -> None:
    pass


def pyrula_round(
    base: Path,
    sync: bool,
    runs: int = 1,
    mark: Callable[[], None] = _no_mark,
    poll_seconds: float = POLL_SECONDS,
    **store_options: Any,
) -> float:
    """`runs` workflows of STEPS steps, submitted at once and run by one worker (concurrently,
    up to its default `concurrency` of 8); seconds from the first submit to the last run done.
    `mark()` is called where the clock is read (callgrind's segment marks)."""
    store = Store(Path(tempfile.mkdtemp(dir=base)) / "store", sync=sync, **store_options)

    async def go() -> tuple[float, list[Any]]:
        mark()
        start = time.perf_counter()
        handles = [submit(pyrula_steps, STEPS, store=store) for _ in range(runs)]
        worker = Worker(store, poll_seconds=poll_seconds, concurrency=max(8, runs))
        await worker.run(until_idle=True)
        seconds = time.perf_counter() - start
        mark()
        return seconds, handles

    seconds, handles = asyncio.run(go())
    for handle in handles:
        record = handle.record
        assert record.status == "completed" and record.result == sum(range(STEPS)), record
    store.close()
    return seconds


def one_flush_supported() -> bool:
    """Whether this pyrula has the opt-in one-flush commit (`Store(metasync=False)`)."""
    import inspect

    try:  # `Store(path)` picks the backend by location; the option is LMDB's
        from pyrula.journal.lmdb_store import LmdbStore
    except ImportError:
        return "metasync" in inspect.signature(Store).parameters
    return "metasync" in inspect.signature(LmdbStore).parameters


def dbos_round(
    base: Path,
    fsync: bool,
    seen: dict[str, Any],
    runs: int = 1,
    mark: Callable[[], None] = _no_mark,
) -> float:
    app = dbos_app()
    app.DBOS(config=dbos_config(Path(tempfile.mkdtemp(dir=base)) / "sys.sqlite", fsync=fsync))
    app.DBOS.launch()
    try:
        seen["fsync" if fsync else "nosync"] = dbos_pragmas()
        mark()
        start = time.perf_counter()
        if runs == 1:
            results = [app.steps(STEPS)]
        else:  # concurrent workflows, each on DBOS's own executor thread
            handles = [app.DBOS.start_workflow(app.steps, STEPS) for _ in range(runs)]
            results = [handle.get_result() for handle in handles]
        seconds = time.perf_counter() - start
        mark()
        assert results == [sum(range(STEPS))] * runs, results
    finally:
        app.DBOS.destroy()
    return seconds


FLOOR = "disk floor: pwrite 100 B + fdatasync"
FLOOR_AHEAD = "disk floor: the same, into space written ahead"


def disk_round(base: Path, *, ahead: bool = False) -> float:
    """The raw disk, for scale: one small write and one fdatasync per 'step', no database; each
    write grows the file, or (`ahead`) lands in space written (and flushed) beforehand, as the
    fact log's appends do, so its flush changes no file metadata."""
    fd = os.open(Path(tempfile.mkdtemp(dir=base)) / "floor", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if ahead:
            os.pwrite(fd, bytes(STEPS * 4096), 0)
            os.fdatasync(fd)
        start = time.perf_counter()
        for i in range(STEPS):
            os.pwrite(fd, b"x" * 100, i * 4096)
            os.fdatasync(fd)
        return time.perf_counter() - start
    finally:
        os.close(fd)


def print_pages_per_step(base: Path, poll: float) -> None:
    """What one run's commits cost the disk, counted at the device around one more round of
    the default store (every commit flushed)."""
    from _common import console, device_writes

    _, writes = device_writes(lambda: pyrula_round(base, True, poll_seconds=poll), base)
    if writes is None:
        return
    console.print(
        f"why: one {STEPS}-step run on the default store took {writes.requests:,.0f} write "
        f"requests of the disk, {writes.pages:,.0f} pages of 4 KiB (the device's counts; its "
        f"submit, claim and finish included): {writes.requests / STEPS:.1f} requests a step, "
        "its fact log's append one of them (a run executing alone: one write and one flush a "
        "step; its facts go into LMDB with its closing commit, whose data pages sit wherever "
        "LMDB's free pages are, then the meta page's O_DSYNC write)"
    )


CG_VARIANTS = ("pyrula, Store(path) (fsync, default)", "DBOS, SQLite defaults (fsync)")


def callgrind_child(base: str, poll_seconds: str) -> None:
    """Under callgrind: one warm-up round of each, then one measured round of each, marked where
    the wall-clock rounds read the clock (so the span is the same: submit -> run done)."""
    from _common import cg_mark

    folder, poll = Path(base), float(poll_seconds)
    seen: dict[str, Any] = {}
    pyrula_round(folder, True, poll_seconds=poll)
    dbos_round(folder, True, seen)
    pyrula_round(folder, True, mark=cg_mark, poll_seconds=poll)
    dbos_round(folder, True, seen, mark=cg_mark)


def instructions_per_step(base: Path, poll: float) -> dict[str, float]:
    """Instructions per step (callgrind, every thread of the process) of one 100-step run."""
    from _common import callgrind_segments

    counts = callgrind_segments(__file__, str(base), str(poll))
    # Segments: pyrula's round, DBOS's set-up between the rounds (not measured), DBOS's round.
    return {CG_VARIANTS[0]: counts[0] / STEPS, CG_VARIANTS[1]: counts[2] / STEPS}


def print_instructions(base: Path, poll: float) -> None:
    from _common import console, instructions_table

    console.print("  [dim]callgrind: one run of each under valgrind (a few minutes)[/dim]")
    per_step = instructions_per_step(base, poll)
    title = (
        f"instructions per step (callgrind, one {STEPS}-step run each after a warm-up run, "
        "submit -> done, every thread of the process: pyrula's committer, DBOS's pollers)"
    )
    console.print(instructions_table(title, per_step, CG_VARIANTS[1]))
    ours, theirs = per_step[CG_VARIANTS[0]], per_step[CG_VARIANTS[1]]
    console.print(f"DBOS executes {theirs / ours:.1f}x pyrula's instructions per step")


# -- 2. resume after a kill ------------------------------------------------------------------------


def _pyrula_done(journal: RunStore, run_id: str) -> int:
    return sum(1 for e in journal.events(run_id) if e.type == "step:done")


def pyrula_resume_round(base: Path) -> tuple[dict[str, float], Path]:
    """Kill a real worker at step KILL_AT, resume in a fresh process; also returns a copy of the
    killed store for the in-process measurement."""
    folder = Path(tempfile.mkdtemp(dir=base))
    path, log = folder / "store", folder / "child.log"
    store = Store(path)
    journal = RunStore(store)
    run_id = "run_bench_resume"
    submit(pyrula_steps, RESUME_STEPS, store=store, run_id=run_id)
    filler = spawn("pyrula-fill", path, log=log)
    wait_for(lambda: _pyrula_done(journal, run_id), filler, log, "pyrula worker")
    kill(filler)
    assert _pyrula_done(journal, run_id) == KILL_AT
    killed = folder / "killed"
    killed.mkdir()
    shutil.copy2(path / "data.mdb", killed / "data.mdb")

    spawned = time.monotonic()
    marks = marks_of(spawn("pyrula-resume", path, log=log), log, "pyrula resume")
    record = journal.get(run_id)
    assert record.status == "completed" and record.result == sum(range(RESUME_STEPS)), record
    # Journaled steps were replayed, not run again: one step:done per step, two attempts.
    assert _pyrula_done(journal, run_id) == RESUME_STEPS
    assert record.attempt == 2, record.attempt
    store.close()
    return _resume_figures(marks, spawned), killed


def pyrula_resume_in_process(killed: Path, base: Path) -> dict[str, float]:
    """The same resume, in this process, on a fresh copy of the killed store."""
    path = Path(tempfile.mkdtemp(dir=base)) / "store"
    path.mkdir()
    shutil.copy2(killed / "data.mdb", path / "data.mdb")
    MARKS.clear()

    async def go() -> None:
        MARKS["t0"] = time.monotonic()
        store = Store(path)
        await _MarkingWorker(store, lease_seconds=30, poll_seconds=0.005).run(until_idle=True)
        store.close()

    asyncio.run(go())
    figures = _resume_figures(dict(MARKS), None)
    with Store(path) as store:
        record = RunStore(store).find("run_bench_resume")
        assert record is not None and record.status == "completed", record
    return figures


def dbos_resume_round(base: Path) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(dir=base))
    db, log = folder / "sys.sqlite", folder / "child.log"
    wfid = "wf-bench-resume"

    def done() -> int:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM operation_outputs WHERE workflow_uuid = ?", (wfid,)
                ).fetchone()
            return int(row[0])
        except sqlite3.OperationalError:  # not created yet, or busy
            return 0

    filler = spawn("dbos-fill", db, wfid, log=log)
    wait_for(done, filler, log, "DBOS worker")
    kill(filler)
    assert done() == KILL_AT, done()
    spawned = time.monotonic()
    marks = marks_of(spawn("dbos-resume", db, wfid, log=log), log, "DBOS resume")
    assert done() == RESUME_STEPS, done()
    return _resume_figures(marks, spawned)


def _resume_figures(marks: dict[str, float], spawned: float | None) -> dict[str, float]:
    figures = {
        "fixed": marks["enter"] - marks["t0"],
        "per_step": (marks["replayed"] - marks["enter"]) / KILL_AT,
        "live": marks["end"] - marks["replayed"],
    }
    if "claimed" in marks:
        figures["claim"] = marks["claimed"] - marks["t0"]
        figures["load"] = marks["enter"] - marks["claimed"]
    if "launched" in marks:
        figures["launch"] = marks["launched"] - marks["t0"]
    if spawned is not None:
        figures["start"] = marks["imported"] - spawned
        figures["total"] = marks["end"] - spawned
    else:
        figures["total"] = marks["end"] - marks["t0"]
    return figures


# -- profiling -------------------------------------------------------------------------------------


def profile(what: str, fn: Callable[[], None]) -> None:
    """Top costs by own time, then pyrula's own functions by cumulative time."""
    import re

    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    lib = os.path.dirname(os.__file__)
    for key, restrict in (("tottime", ()), ("cumulative", (r"pyrula/",))):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(*restrict, 16)
        text = out.getvalue().replace(lib + "/", "").replace(str(Path.cwd()) + "/", "")
        text = re.sub(r"\S*/site-packages/", "", text)
        lines = [line for line in text.splitlines() if line.strip()]
        calls = next((line.strip() for line in lines if "function calls" in line), "")
        table = lines[next(k for k, line in enumerate(lines) if "ncalls" in line) :]
        print(f"-- profile: {what}; by {key}; {calls}", flush=True)
        print("\n".join(table), flush=True)


def run_profiles(base: Path, killed: Path) -> None:
    for sync in (True, False):
        store = Store(Path(tempfile.mkdtemp(dir=base)) / "store", sync=sync)
        submit(pyrula_steps, KILL_AT, store=store)
        label = "Store(path)" if sync else "Store(path, sync=False)"

        def work(store: Store = store) -> None:
            asyncio.run(Worker(store, poll_seconds=0.001).run(until_idle=True))

        profile(f"{KILL_AT:,} live steps, {label}", work)
        store.close()
    path = Path(tempfile.mkdtemp(dir=base)) / "store"
    path.mkdir()
    shutil.copy2(killed / "data.mdb", path / "data.mdb")
    store = Store(path)

    # Only the replay: the first live step (after KILL_AT replayed ones) stops the attempt.
    class _Stop(BaseException):
        pass

    def stopper(i: int) -> int:
        raise _Stop

    class _StopWorker(Worker):
        async def execute(self, run: Any) -> None:
            globals()["_value"] = stopper
            try:
                await super().execute(run)
            finally:
                globals()["_value"] = original

    original = _value

    def replay() -> None:
        async def go() -> None:
            with contextlib.suppress(_Stop):
                await _StopWorker(store, poll_seconds=0.005).run(max_runs=1)

        asyncio.run(go())

    profile(f"claim + load journal + replay {KILL_AT:,} steps (in process, fsync on)", replay)
    store.close()


# -- report ----------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values)


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def main() -> None:
    from importlib.metadata import version

    import lmdb
    from _common import console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="steps/s rounds (default 5)")
    parser.add_argument("--resume-rounds", type=int, default=3, help="kill/resume rounds (3)")
    parser.add_argument("--dir", default=None, help="base folder for the stores (a temp dir)")
    parser.add_argument("--profile", action="store_true", help="cProfile 1,000 pyrula steps")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument(
        "--poll", type=float, default=POLL_SECONDS, help="the worker's poll_seconds (0.1)"
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="also count instructions per step of one run each, pyrula and DBOS (valgrind)",
    )
    parser.add_argument("--only-callgrind", action="store_true", help="only the callgrind rows")
    opts = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="pyrula-bench-runs-", dir=opts.dir))
    started = time.monotonic()
    console.rule("[bold]bench_runs: durable runs, pyrula vs DBOS on SQLite")
    facts = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "pyrula": version("pyrula"),
        "dbos": version("dbos"),
        "lmdb": lmdb.__version__,
        "sqlite": sqlite3.sqlite_version,
        "stores under": str(base),
        "device": os.stat(base).st_dev,
    }
    console.print(", ".join(f"{k} {v}" for k, v in facts.items()))
    poll = opts.poll
    console.print(f"pyrula workers poll the queue every {poll:g} s while their runs execute")
    if opts.only_callgrind:
        print_instructions(base, poll)
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)
        return

    # 1. steps per second
    pragmas: dict[str, Any] = {}
    conc = CONCURRENT
    variants: dict[str, Callable[[], float]] = {
        "pyrula, Store(path) (fsync, default)": lambda: pyrula_round(base, True, poll_seconds=poll),
        "pyrula, Store(path, sync=False)": lambda: pyrula_round(base, False, poll_seconds=poll),
        "DBOS, SQLite defaults (fsync)": lambda: dbos_round(base, True, pragmas),
        "DBOS, SQLite synchronous=OFF": lambda: dbos_round(base, False, pragmas),
        FLOOR: lambda: disk_round(base),
        f"pyrula, Store(path), {conc} runs at once": lambda: pyrula_round(
            base, True, conc, poll_seconds=poll
        ),
        f"DBOS, SQLite defaults, {conc} runs at once": lambda: dbos_round(
            base, True, pragmas, conc
        ),
    }
    policy = {
        "pyrula, Store(path) (fsync, default)": "sync=True: a step's fact log append + "
        "fdatasync; a commit's fdatasync + O_DSYNC meta write",
        "pyrula, Store(path, sync=False)": "sync=False: no flush",
        "DBOS, SQLite defaults (fsync)": "",
        "DBOS, SQLite synchronous=OFF": "",
        FLOOR: "1 fdatasync per step",
        f"pyrula, Store(path), {conc} runs at once": "as the default (group commit if present)",
        f"DBOS, SQLite defaults, {conc} runs at once": "as DBOS's defaults",
    }
    same_policy = {
        "pyrula, Store(path) (fsync, default)": "DBOS, SQLite defaults (fsync)",
        "pyrula, Store(path, sync=False)": "DBOS, SQLite synchronous=OFF",
        f"pyrula, Store(path), {conc} runs at once": f"DBOS, SQLite defaults, {conc} runs at once",
    }
    runs_of = {name: conc if "runs at once" in name else 1 for name in variants}
    if one_flush_supported():
        for runs in (1, conc):
            name = f"pyrula, Store(path, metasync=False), {runs} run(s)"
            variants[name] = functools.partial(
                pyrula_round, base, True, runs, poll_seconds=poll, metasync=False
            )
            policy[name] = "one flush per commit (opt-in): fdatasync, meta page unsynced"
            runs_of[name] = runs
            same_policy[name] = (
                "DBOS, SQLite defaults (fsync)"
                if runs == 1
                else f"DBOS, SQLite defaults, {conc} runs at once"
            )
    variants[FLOOR_AHEAD] = lambda: disk_round(base, ahead=True)
    policy[FLOOR_AHEAD] = "1 fdatasync per step, no metadata (the fact log's pattern)"
    runs_of[FLOOR_AHEAD] = 1
    same_policy[FLOOR_AHEAD] = "DBOS, SQLite defaults (fsync)"
    names = list(variants)
    for fn in variants.values():  # warm-up, discarded
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(opts.rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            seconds[name].append(variants[name]())
        console.print(f"  [dim]steps/s: round {r + 1}/{opts.rounds} done[/dim]")
    for key, name in (("fsync", names[2]), ("nosync", names[3]), ("fsync", names[6])):
        p = pragmas[key]
        sync_name = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(p["synchronous"], "?")
        policy[name] = f"journal_mode {p['journal_mode']}, synchronous {sync_name}"
        if name == names[6]:
            policy[name] += f", {conc} workflows at once"

    rate = {name: [runs_of[name] * STEPS / s for s in seconds[name]] for name in names}
    med = {name: _median(rate[name]) for name in names}
    same_policy.update({names[2]: names[2], names[3]: names[3], names[6]: names[6]})
    same_policy[FLOOR] = names[2]
    table = Table(
        title=f"{STEPS}-step workflow, submit -> done, fresh store per round, median of "
        f"{opts.rounds}",
        title_justify="left",
    )
    for col, justify in (
        ("variant", "left"),
        ("durability per commit", "left"),
        ("steps/s", "right"),
        ("min-max", "right"),
        ("per step", "right"),
        ("x DBOS, same policy", "right"),
        ("x peer (314)", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for name in names:
        if name == FLOOR:
            table.add_section()
        table.add_row(
            name,
            policy[name],
            f"{med[name]:,.0f}",
            f"{min(rate[name]):,.0f}-{max(rate[name]):,.0f}",
            fmt(1 / med[name]),
            f"{med[name] / med[same_policy[name]]:.1f}",
            f"{med[name] / PEER_STEPS_PER_S[1]:.2f}",
        )
    lo, hi = PEER_STEPS_PER_S
    table.add_row("peer, published", "", f"{lo:.0f}-{hi:.0f}", "", "", "", "1.00")
    table.add_row("target: 10x peer", "", f"{10 * lo:,.0f}-{10 * hi:,.0f}", "", "", "", "10.00")
    console.print(table)
    # What the disk alone allows one run at full durability: its step time less its CPU (the
    # sync=False row, same rounds) is what its flush costs (the fact log's append).
    flushes = 1 / med[names[0]] - 1 / med[names[1]]
    ahead = 1 / med[FLOOR_AHEAD]
    console.print(
        f"the disk alone, as the fact log appends: {fmt(ahead)} per step (its floor row); with "
        f"no CPU at all one run would reach {1 / med[names[2]] / ahead:.1f}x DBOS in this run"
    )
    console.print(
        f"one run, full durability: {fmt(1 / med[names[0]])} per step, of which "
        f"{fmt(flushes)} is its flush (the step less the sync=False row's: one append to the "
        "fact log, and its share of the run's commits); with "
        f"no CPU at all a step would still cost that, so on this disk in this run pyrula's "
        f"ceiling is {1 / med[names[2]] / flushes:.1f}x DBOS's {fmt(1 / med[names[2]])} per "
        f"step (measured: {med[names[0]] / med[names[2]]:.1f}x)"
    )
    print_pages_per_step(base, poll)
    if opts.callgrind:
        print_instructions(base, poll)

    # 2. resume after a kill at step KILL_AT
    py_proc: list[dict[str, float]] = []
    py_inproc: list[dict[str, float]] = []
    dbos_proc: list[dict[str, float]] = []
    killed: Path | None = None
    if opts.resume_rounds:
        for r in range(opts.resume_rounds):
            figures, killed = pyrula_resume_round(base)
            py_proc.append(figures)
            dbos_proc.append(dbos_resume_round(base))
            for _ in range(2):
                py_inproc.append(pyrula_resume_in_process(killed, base))
            console.print(f"  [dim]resume: round {r + 1}/{opts.resume_rounds} done[/dim]")

        def m(rows: list[dict[str, float]], key: str) -> float:
            return _median([row[key] for row in rows]) if rows and key in rows[0] else float("nan")

        live = RESUME_STEPS - KILL_AT
        table = Table(
            title=f"resume a {RESUME_STEPS:,}-step run SIGKILLed with {KILL_AT:,} steps journaled "
            f"(medians; {opts.resume_rounds} kills each; in-process: {len(py_inproc)} copies)",
            title_justify="left",
        )
        for col in (
            "variant",
            "process start",
            "fixed recovery",
            "per replayed step",
            f"{live} live steps",
            "spawn -> done",
            "fixed: DBOS/x, peer/x",
            "step: DBOS/x, peer/x",
        ):
            table.add_column(col, justify="left" if col == "variant" else "right")
        d_fixed, d_step = m(dbos_proc, "fixed"), m(dbos_proc, "per_step")
        rows = (
            ("pyrula, new process", py_proc),
            ("pyrula, this process", py_inproc),
            ("DBOS, new process", dbos_proc),
        )
        for name, data in rows:
            table.add_row(
                name,
                fmt(m(data, "start")) if "start" in data[0] else "-",
                fmt(m(data, "fixed")),
                fmt(m(data, "per_step")),
                fmt(m(data, "live")),
                fmt(m(data, "total")) if "start" in data[0] else "-",
                f"{d_fixed / m(data, 'fixed'):.1f}, {PEER_FIXED_S / m(data, 'fixed'):.1f}",
                f"{d_step / m(data, 'per_step'):.1f}, {PEER_REPLAY_S / m(data, 'per_step'):.1f}",
            )
        table.add_row(
            "peer, published", "", fmt(PEER_FIXED_S), fmt(PEER_REPLAY_S), "", "", "-, 1.0", "-, 1.0"
        )
        table.add_row(
            "target: 10x peer",
            "",
            fmt(PEER_FIXED_S / 10),
            fmt(PEER_REPLAY_S / 10),
            "",
            "",
            "-, 10.0",
            "-, 10.0",
        )
        console.print(table)
        console.print(
            "fixed recovery, split (medians): "
            f"pyrula fresh process: open store + claim {fmt(m(py_proc, 'claim'))}, load the "
            f"journal {fmt(m(py_proc, 'load'))}; pyrula in process: open + claim "
            f"{fmt(m(py_inproc, 'claim'))}, load {fmt(m(py_inproc, 'load'))}; "
            f"DBOS: DBOS() + launch() {fmt(m(dbos_proc, 'launch'))}, then "
            f"{fmt(m(dbos_proc, 'fixed') - m(dbos_proc, 'launch'))} until the recovery queue runs "
            "the workflow"
        )
        console.print(
            "per replayed step, journal load spread over the replayed steps (pyrula): "
            f"fresh process {fmt(m(py_proc, 'per_step') + m(py_proc, 'load') / KILL_AT)}, "
            f"in process {fmt(m(py_inproc, 'per_step') + m(py_inproc, 'load') / KILL_AT)}"
        )

        console.print(
            "DBOS/x, peer/x: the DBOS (or peer) figure divided by this row's, i.e. how many times "
            "faster this row is. Fixed recovery = worker start -> body re-entered; per replayed "
            f"step = body re-entered -> step {KILL_AT:,} returns, / {KILL_AT:,}."
        )

    # One summary: medians, same-disk ratios, the peer's published figures and the 10x targets.
    summary = Table(
        title="summary (medians): pyrula vs DBOS on this disk, the peer's figures, 10x targets",
        title_justify="left",
    )
    for col in ("metric", "pyrula", "DBOS", "pyrula better by", "peer", "10x peer", "vs 10x"):
        summary.add_column(col, justify="left" if col == "metric" else "right")
    lo, hi = PEER_STEPS_PER_S

    def rate_row(metric: str, ours: float, theirs: float, peer: str) -> None:
        ok = ours >= 10 * hi
        summary.add_row(
            metric,
            f"{ours:,.0f}",
            f"{theirs:,.0f}",
            f"{ours / theirs:.1f}x",
            peer,
            f">= {10 * hi:,.0f}",
            "met" if ok else "MISSED",
        )

    def time_row(metric: str, ours: float, theirs: float, peer: float) -> None:
        ok = ours <= peer / 10
        summary.add_row(
            metric,
            fmt(ours),
            fmt(theirs),
            f"{theirs / ours:.1f}x",
            fmt(peer),
            f"<= {fmt(peer / 10)}",
            "met" if ok else "MISSED",
        )

    rate_row(
        "steps/s, fsync per commit (defaults)", med[names[0]], med[names[2]], f"{lo:.0f}-{hi:.0f}"
    )
    rate_row(
        f"steps/s, fsync per commit, {conc} runs at once per worker",
        med[names[5]],
        med[names[6]],
        f"{lo:.0f}-{hi:.0f}",
    )
    for name in names[7:]:
        rate_row(f"steps/s, {name[len('pyrula, ') :]}", med[name], med[same_policy[name]], "-")
    rate_row("steps/s, no fsync (not defaults)", med[names[1]], med[names[3]], "-")
    if opts.resume_rounds:
        time_row("fixed recovery, new process", m(py_proc, "fixed"), d_fixed, PEER_FIXED_S)
        time_row(
            "  + process start (interpreter, imports)",
            m(py_proc, "fixed") + m(py_proc, "start"),
            d_fixed + m(dbos_proc, "start"),
            PEER_FIXED_S,
        )
        time_row("per replayed step, new process", m(py_proc, "per_step"), d_step, PEER_REPLAY_S)
        time_row(
            "  + journal load spread over the steps",
            m(py_proc, "per_step") + m(py_proc, "load") / KILL_AT,
            d_step,
            PEER_REPLAY_S,
        )
        time_row(
            "per replayed step, in this process", m(py_inproc, "per_step"), d_step, PEER_REPLAY_S
        )
    console.print(summary)
    console.print(
        "DBOS columns: its defaults for the fsync rows and the resume, synchronous=OFF for the "
        "no-fsync row. The peer's fixed recovery and per-step figures are compared as published; "
        "whether they include process start is not stated."
    )

    if opts.profile and killed is not None:
        run_profiles(base, killed)

    console.print(f"total {time.monotonic() - started:.0f} s")
    if not opts.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--callgrind-child":
        callgrind_child(sys.argv[2], sys.argv[3])
    else:
        main()
