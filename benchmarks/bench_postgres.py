"""The store on PostgreSQL against LMDB (and DBOS on the same PostgreSQL, when it is installed).

Every PostgreSQL figure is on one server: `--url`, else a throwaway PostgreSQL 16 from the
`pgserver` wheel (unix socket, the server's defaults: `synchronous_commit=on`, `fsync=on`). Each
variant gets a fresh schema (PyRula) or database (DBOS). LMDB stores are fresh temp folders with
the default `sync=True`. Variants run interleaved round by round; medians are printed with their
ratio to the LMDB row measured in the same rounds.

1. steps/s: the 100-step workflow (each step returns its index), submission to finished run, in
   one in-process worker: one run at a time, and 8 runs at once (`concurrency=8`). DBOS runs
   the same workflow on the same server (`system_database_url`), when `dbos` imports.
2. runs/s with 1, 4 and 8 worker processes (`pyrula worker`) on one PostgreSQL, `--rounds`
   rounds (median and range, and each round's ratio to one worker): `--runs` runs of a 3-step
   workflow submitted, the workers started, and the backlog's drain timed from the moment the
   last worker is up; each run is checked to have completed once (its side effect logged).
3. claim-to-start latency: an idle worker, a run submitted, the time from `submit` returning to
   its body starting. With `LISTEN/NOTIFY` (PostgreSQL) against polling (the same worker with
   wake-ups turned off, `poll_seconds=0.1`, the default).
4. replay of 1,000 recorded exchanges through the openai SDK (`pyrula.cassette(mode="none")`),
   from PostgreSQL vs from LMDB.

`--full` adds the exactly-once check at full size: 8 worker processes, 5,000 runs, 8 of the
workers SIGKILLed at random moments (each replaced at once).

`--before REF` adds to part 1 PostgreSQL on the code of git revision REF, measured in the same
rounds, so a change is compared with the code before it in one run; both PostgreSQL rows then
run in child processes (the same clean start for both).

Run: python benchmarks/bench_postgres.py [--rounds 3] [--runs 2000] [--url URL] [--full]
     [--skip 1,2,3,4] [--before REF]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, cast

import httpx
import psycopg

import pyrula
from pyrula.journal.store import Store
from pyrula.runtime import RunStore, Worker, submit
from pyrula.workflows import WorkflowContext, workflow

ROOT = Path(__file__).parents[1]
sys.path.insert(1, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from _common import before_tree, completion_json, json_response, openai_client  # noqa: E402

STEPS = 100
CPU: list[str] = []  # part 2's CPU accounting, one line per drain
STARTED: dict[str, float] = {}


def _value(i: int) -> int:
    return i


def _effect(log: str, n: int) -> int:
    with open(log, "a") as out:
        out.write(f"{n}\n")
    return n


@workflow(name="bench_pg.steps")
async def steps(ctx: WorkflowContext, n: int) -> int:
    total = 0
    for i in range(n):
        total += await ctx.step(f"s{i}", _value, i)
    return total


@workflow(name="bench_pg.small")
async def small(ctx: WorkflowContext, log: str, n: int) -> int:
    await ctx.step("a", _value, 1)
    await ctx.step("b", _value, 2)
    done: int = await ctx.step("effect", _effect, log, n)  # the journaled JSON of `_effect`
    return done


@workflow(name="bench_pg.latency")
async def latency(ctx: WorkflowContext, key: str) -> None:
    STARTED[key] = time.perf_counter()


# -- servers and stores ---------------------------------------------------------------------------


def server_url(given: str | None) -> str:
    if given:
        return given
    from pgserver.postgres_server import get_server

    found = get_server(Path(tempfile.mkdtemp(prefix="bench-pg-")), cleanup_mode="delete")
    return str(found.get_uri())


def fresh_schema(base: str) -> str:
    schema = f"b_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}options=-csearch_path%3D{schema}"


def fresh_database(base: str) -> str:
    name = f"dbos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    before, _, query = base.partition("?")
    return before.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


def location(kind: str, base: str) -> str:
    return tempfile.mkdtemp(prefix="bench-lmdb-") if kind == "lmdb" else fresh_schema(base)


# -- 1. steps/s -----------------------------------------------------------------------------------


def pyrula_steps(where: str, runs: int) -> float:
    store = Store(where)
    try:
        worker = Worker(store, poll_seconds=0.005, concurrency=max(runs, 1))
        start = time.perf_counter()
        handles = [submit(steps, STEPS, store=store) for _ in range(runs)]
        asyncio.run(worker.run(until_idle=True))
        seconds = time.perf_counter() - start
        assert all(h.record.result == sum(range(STEPS)) for h in handles)
    finally:
        store.close()
    return runs * STEPS / seconds


_DBOS: dict[str, Any] = {}


def dbos_steps(base: str, runs: int) -> float | None:
    try:
        from dbos import DBOS, DBOSConfig
    except ImportError:
        return None
    if "workflow" not in _DBOS:
        # Registered by calling DBOS's decorators (what `@DBOS.step()` does): where dbos is not
        # installed (the lint venv) mypy cannot read their types, and each name keeps its own.
        def dbos_value(i: int) -> int:
            return i

        dbos_value = DBOS.step()(dbos_value)

        def dbos_workflow(n: int) -> int:
            return sum(dbos_value(i) for i in range(n))

        _DBOS["workflow"] = DBOS.workflow()(dbos_workflow)
    config: DBOSConfig = {
        "name": "bench-pg",
        "system_database_url": fresh_database(base),
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()
    try:
        start = time.perf_counter()
        handles = [DBOS.start_workflow(_DBOS["workflow"], STEPS) for _ in range(runs)]
        assert all(h.get_result() == sum(range(STEPS)) for h in handles)
        return runs * STEPS / (time.perf_counter() - start)
    finally:
        DBOS.destroy()


def child_steps(tree: Path | None, base: str, runs: int) -> float:
    """`pyrula_steps` on PostgreSQL in a child process: with the code of another revision
    (`tree`, from `--before`), or this one (None), so both start from the same clean state."""
    paths = [str(tree)] if tree is not None else []
    code = (
        f"import sys; sys.path[:0] = {[*paths, str(ROOT / 'benchmarks')]!r}\n"
        "import bench_postgres as b, pyrula\n"
        f"assert pyrula.__file__.startswith({str(tree or ROOT)!r}), pyrula.__file__\n"
        f"print(b.pyrula_steps(b.fresh_schema({base!r}), {runs}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


# -- 2. runs/s with worker processes --------------------------------------------------------------


def runs_per_second(base: str, workers: int, runs: int, kills: int = 0) -> float:
    """Submit `runs` runs, start `workers` worker processes, and once every one is up, time
    until every run has completed: the runs/s of a backlog drained (what the workers completed
    before the last was up is not counted, nor is submission or process start-up).

    `kills`: SIGKILL that many workers, one at a random moment after each tenth of the runs
    completed, each replaced by a fresh one at once. Every run must still complete exactly once
    (one `run:done`); a step cut by a kill may have run its side effect before its outcome was
    journaled, so an effect then shows twice, at most `concurrency` per kill."""
    url = fresh_schema(base)
    folder = Path(tempfile.mkdtemp(prefix="bench-effects-"))
    log = folder / "effects.log"
    log.touch()
    Store(url).close()
    command = [sys.executable, "-m", "pyrula.cli.app", "worker", "--import", "bench_postgres"]
    command += ["--store", url]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'benchmarks'}{os.pathsep}{ROOT}"}
    started = 0

    def start() -> subprocess.Popen[bytes]:
        nonlocal started
        started += 1
        out = (folder / f"worker{started}.log").open("w")
        return subprocess.Popen(command, cwd=ROOT, env=env, stderr=out)

    rng = random.Random(runs * 31 + workers)
    killed = 0
    with Store(url) as store:
        ids = [submit(small, str(log), n, store=store).id for n in range(runs)]
    processes = [start() for _ in range(workers)]
    logs = [folder / f"worker{i + 1}.log" for i in range(workers)]
    try:
        while not all("pyrula worker" in out.read_text() for out in logs):
            time.sleep(0.05)

        # Progress is read from the side-effect log (each run's last step writes its line),
        # not the store: reading every run record this often would load the machine itself.
        def effects() -> int:
            return len(set(log.read_text().split()))

        begun = time.perf_counter()
        early = effects()
        cpu = (_cpu_seconds([p.pid for p in processes]), _cpu_seconds(), _busy())
        assert early < runs / 2, f"{early} of {runs} runs done before the workers were up"
        next_kill = runs / 10 * rng.uniform(0.5, 1.5)
        while (done := effects()) < runs:
            if killed < kills and done >= next_kill:
                victim = rng.randrange(len(processes))
                processes[victim].send_signal(signal.SIGKILL)
                processes[victim].wait(60)
                processes[victim] = start()
                killed += 1
                next_kill = done + runs / 10 * rng.uniform(0.5, 1.5)
            time.sleep(0.02)
        seconds = time.perf_counter() - begun
        if not kills:  # where the CPU went while they drained it (workers, server, machine)
            drained = runs - early
            mine = _cpu_seconds([p.pid for p in processes]) - cpu[0]
            server = _cpu_seconds() - cpu[1]
            busy = [now - then for now, then in zip(_busy(), cpu[2], strict=True)]
            CPU.append(
                f"{workers} worker(s): CPU per run {mine / drained * 1e3:.2f} ms in the workers, "
                f"{server / drained * 1e3:.2f} ms in the server; machine busy "
                f"{100 * busy[0] / busy[1]:.0f}%"
            )
        with Store(url) as store:
            journal = RunStore(store)
            while any(run.status != "completed" for run in journal.runs()):
                time.sleep(0.2)  # the last runs' closing writes
            finished = Counter(
                [sum(event.type == "run:done" for event in journal.events(run)) for run in ids]
            )
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(60)
    assert finished == Counter({1: runs}), f"runs by how often they completed: {finished}"
    counts = Counter(log.read_text().split())
    assert set(counts) == {str(n) for n in range(runs)}, "a run's side effect never ran"
    twice = sum(count - 1 for count in counts.values())
    assert twice <= 8 * killed, f"{twice} side effects ran twice with {killed} kill(s)"
    if kills:
        print(
            f"   {killed} worker(s) SIGKILLed and replaced; every run completed once; "
            f"{twice} side effect(s) of a step cut by a kill ran twice"
        )
    return (runs - early) / seconds


def _cpu_seconds(pids: list[int] | None = None) -> float:
    """CPU seconds (user + system) used so far by `pids`, or by every `postgres` process."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or (pids is not None and int(entry.name) not in pids):
            continue
        try:
            if pids is None and (entry / "comm").read_text().strip() != "postgres":
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def _busy() -> tuple[float, float]:
    """The machine's busy and total CPU time so far (/proc/stat), in clock ticks."""
    counts = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(counts) - counts[3] - counts[4], sum(counts)


def spread(values: list[float], unit: str = "", digits: int = 1) -> str:
    """The median of `values` and their range, as the figures are printed."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f}{unit} (range {low:.{digits}f}-{high:.{digits}f})"


# -- 3. claim-to-start latency ----------------------------------------------------------------


class _Polling(Worker):
    """The stock worker with wake-ups turned off: it polls every `poll_seconds`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A stand-in where the worker asks for wake-ups; the store itself everywhere else.
        self.store = cast(Store, _NoWakeups(self.store))


class _NoWakeups:
    def __init__(self, store: Store) -> None:
        self._store = store

    def wakeups(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def claim_latency(base: str, polling: bool, samples: int = 20) -> float:
    """Median seconds from `submit` returning to the body starting."""
    store = Store(fresh_schema(base))
    delays: list[float] = []

    async def main() -> None:
        kind = _Polling if polling else Worker
        worker = kind(store, poll_seconds=0.1)
        task = asyncio.ensure_future(worker.run())
        await asyncio.sleep(0.5)  # idle, listening or polling
        for i in range(samples):
            key = f"{polling}-{i}"
            submitted = time.perf_counter()
            await asyncio.to_thread(submit, latency, key, store=store)
            while key not in STARTED:
                await asyncio.sleep(0.0005)
            delays.append(STARTED[key] - submitted)
            await asyncio.sleep(0.05 + (i % 7) * 0.013)  # submissions at no fixed phase
        worker.stop()
        worker.stop()
        await task

    try:
        asyncio.run(main())
    finally:
        store.close()
    return statistics.median(delays)


# -- 4. replay of 1,000 exchanges ------------------------------------------------------------


def replay_seconds(where: str, calls: int = 1000) -> float:
    def provider(request: httpx.Request) -> httpx.Response:
        return json_response(completion_json(f"answer {request.content[-40:]!r}"))

    client = openai_client(pyrula.HttpxTransport(httpx.MockTransport(provider)))
    store = Store(where)
    try:
        with pyrula.cassette("bench", mode="all", store=store):
            for i in range(calls):
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": f"q {i}"}]
                )
        offline = openai_client(pyrula.HttpxTransport(httpx.MockTransport(_refuse)))
        start = time.perf_counter()
        with pyrula.cassette("bench", mode="none", store=store):
            for i in range(calls):
                offline.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": f"q {i}"}]
                )
        return time.perf_counter() - start
    finally:
        store.close()


def _refuse(request: httpx.Request) -> httpx.Response:
    raise AssertionError("a replay went to the network")


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2000, help="runs for the runs/s figure")
    parser.add_argument("--url", help="a PostgreSQL server (default: a throwaway pgserver)")
    parser.add_argument("--full", action="store_true", help="8 workers, 5,000 runs, once each")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: 1,2,3,4")
    parser.add_argument("--before", metavar="REF", help="part 1 also measures this git revision")
    opts = parser.parse_args()
    tree = (
        before_tree(opts.before, Path(tempfile.mkdtemp(prefix="bench-before-")))
        if opts.before
        else None
    )
    base = server_url(opts.url)
    skip = set(opts.skip.split(","))
    with psycopg.connect(base) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    print(
        f"PostgreSQL {version[0] if version else '?'}, "
        f"synchronous_commit={sync[0] if sync else '?'}"
    )
    print(
        f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}, "
        f"{os.cpu_count()} cores"
    )

    if "1" not in skip:
        print("\n1. journaled steps/s of the 100-step workflow (median of rounds)")
        rates: dict[str, list[float]] = {}
        for round_ in range(opts.rounds):
            order = ["lmdb", "postgresql", "dbos", *(["before"] if tree else [])]
            for kind in order[round_ % len(order) :] + order[: round_ % len(order)]:
                for runs in (1, 8):
                    if kind == "before" and tree is not None:
                        rate = child_steps(tree, base, runs)
                    elif kind == "postgresql" and tree is not None:
                        rate = child_steps(None, base, runs)
                    elif kind == "dbos":
                        measured = dbos_steps(base, runs)
                        if measured is None:
                            continue
                        rate = measured
                    else:
                        rate = pyrula_steps(location(kind, base), runs)
                    rates.setdefault(f"{kind}, {runs} run(s) at once", []).append(rate)
        for runs in (1, 8):
            lmdb = statistics.median(rates[f"lmdb, {runs} run(s) at once"])
            for kind in ("lmdb", "postgresql", "dbos", "before"):
                found = rates.get(f"{kind}, {runs} run(s) at once")
                if found:
                    rate = statistics.median(found)
                    print(
                        f"   {kind:<11} {runs} at once: {rate:8.0f} steps/s  "
                        f"({rate / lmdb:.2f}x LMDB)"
                    )
            dbos = rates.get(f"dbos, {runs} run(s) at once")
            if dbos:
                found = rates[f"postgresql, {runs} run(s) at once"]
                pg = statistics.median(found)
                each = [mine / theirs for mine, theirs in zip(found, dbos, strict=True)]
                ratio = pg / statistics.median(dbos)
                print(
                    f"   pyrula on PostgreSQL / DBOS on PostgreSQL: {ratio:.2f}x "
                    f"(DBOS {spread(dbos, ' steps/s', 0)}; per round {spread(each, 'x', 2)}; "
                    f"target {2 if runs == 1 else 5}x)"
                )
                before = rates.get(f"before, {runs} run(s) at once")
                if before:
                    was = statistics.median(before) / statistics.median(dbos)
                    print(
                        f"   (at {opts.before}: {was:.2f}x DBOS; now / then: "
                        f"{pg / statistics.median(before):.2f}x)"
                    )

    if "2" not in skip:
        print(
            f"\n2. runs/s, {opts.runs} runs of a 3-step workflow, worker processes on PostgreSQL "
            f"({opts.rounds} rounds, each worker count in turn)"
        )
        per: dict[int, list[float]] = {1: [], 4: [], 8: []}
        for round_ in range(opts.rounds):
            for workers in (1, 4, 8) if round_ % 2 == 0 else (8, 4, 1):
                per[workers].append(runs_per_second(base, workers, opts.runs))
        for line in CPU:
            print(f"   {line}")
        for workers, found in per.items():
            each = [rate / one for rate, one in zip(found, per[1], strict=True)]
            target = {1: "", 4: ", target 1.5x", 8: ", target 1x"}[workers]
            print(
                f"   {workers} worker(s): {spread(found, ' runs/s')}; "
                f"x one worker, per round: {spread(each, 'x', 2)}{target}"
            )

    if "3" not in skip:
        print("\n3. claim-to-start latency, an idle worker (median of 20 submissions)")
        notify = claim_latency(base, polling=False)
        poll = claim_latency(base, polling=True)
        print(f"   LISTEN/NOTIFY: {notify * 1e3:7.2f} ms")
        print(f"   polling 0.1 s: {poll * 1e3:7.2f} ms  ({poll / notify:.1f}x)")

    if "4" not in skip:
        print("\n4. replay of 1,000 recorded exchanges through the openai SDK")
        times: dict[str, list[float]] = {"lmdb": [], "postgresql": []}
        for round_ in range(opts.rounds):
            for kind in ["lmdb", "postgresql"] if round_ % 2 == 0 else ["postgresql", "lmdb"]:
                times[kind].append(replay_seconds(location(kind, base)))
        lmdb = statistics.median(times["lmdb"])
        for kind, found in times.items():
            seconds = statistics.median(found)
            print(
                f"   {kind:<11} {seconds:6.2f} s  ({1000 / seconds:6.0f} calls/s, "
                f"{seconds / lmdb:.2f}x LMDB time)"
            )

    if opts.full:
        print(
            "\n5. full size: 8 worker processes, 5,000 runs, random SIGKILLs, each run "
            "completed exactly once"
        )
        rate = runs_per_second(base, 8, 5000, kills=8)
        print(f"   5,000 runs completed once each at {rate:.1f} runs/s")


if __name__ == "__main__":
    main()
