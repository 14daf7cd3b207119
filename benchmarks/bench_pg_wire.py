"""Where a journaled step's time goes on PostgreSQL: messages, round trips and CPU per step.

Runs the 100-step workflow of `bench_postgres.py` (one run, then 8 runs at once in one worker)
with libpq's protocol trace on every connection the store opens, and counts per journaled step
what the client sent: statements (extended-protocol `Execute`s plus simple `Query`s, by their
first word), and round trips (`Sync`s: each waits for the server's `ReadyForQuery`). It also
gives the CPU per step of the worker's process (`time.process_time`, all its threads) and of
the server (every postgres process's user+system time, from psutil), the WAL the server wrote
per step (all sessions: run it on a server nothing else writes to), and optionally a cProfile
of the worker process (`--profile N`: the N functions of most own time).

`--tree PATH` runs the code of another tree (e.g. one made by `before_tree`), so two revisions
can be compared on one server. The trace itself costs CPU: take CPU figures from a run with
`--no-trace`.

`--commits N` makes only N group commits of one fenced fact each (nothing traced), for
instruction counts: `valgrind --tool=callgrind python benchmarks/bench_pg_wire.py --url URL
--commits 70`, and again with `--commits 20`; the difference over 50 is one commit's.

Run: python benchmarks/bench_pg_wire.py [--url URL] [--runs 1,8] [--no-trace] [--profile 25]
     [--steps 100] [--tree PATH] [--commits N]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]


def _server(url: str | None) -> tuple[str, Any]:
    import psutil

    if url is None:
        from pgserver.postgres_server import get_server

        found = get_server(Path(tempfile.mkdtemp(prefix="bench-wire-")), cleanup_mode="delete")
        url = str(found.get_uri())
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        backend = psutil.Process(int(row[0])) if row else None
        postmaster = backend.parent() if backend is not None else None
    return url, postmaster


def _server_cpu(postmaster: Any) -> float:
    if postmaster is None:
        return 0.0
    total = 0.0
    for proc in [postmaster, *postmaster.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except Exception:
            continue
        total += times.user + times.system
    return total


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by thread name (Linux)."""
    import threading

    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        name = thread.name.split("_")[0].rstrip("-0123456789")
        found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return found


def _wal(base: str) -> int:
    """The server's WAL position, in bytes."""
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def _trace_connections(folder: Path) -> None:
    """Every psycopg connection opened from now on writes libpq's trace into `folder`."""
    import psycopg
    from psycopg import pq

    original = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
        conn = original(cls, *args, **kwargs)
        out = open(folder / f"{uuid.uuid4().hex}.trace", "w")  # noqa: SIM115
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        conn._bench_trace = out  # kept open as long as the connection
        return conn

    psycopg.Connection.connect = classmethod(connect)  # type: ignore[method-assign,assignment]


def _count(folder: Path) -> Counter[str]:
    """Per trace file: round trips (each `Sync`, and each `Flush` not sent with one: psycopg's
    request for a result inside a pipeline), and each statement run (a `Bind` of a parsed or
    prepared statement, or a simple `Query`) by its first word."""
    counts: Counter[str] = Counter()
    for path in folder.glob("*.trace"):
        named: dict[str, str] = {}
        previous = ""
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[0] == "F":
                # A request for answers: a Sync, or a Flush not sent right after one.
                if parts[2] == "Sync" or (parts[2] == "Flush" and previous != "Sync"):
                    counts["round trips"] += 1
                previous = parts[2]
            if len(parts) < 4 or parts[0] != "F":
                continue
            kind, rest = parts[2], parts[3].split('"')
            if kind == "Parse" and len(rest) >= 4:
                named[rest[1]] = rest[3].split()[0].upper() if rest[3].split() else "?"
            elif kind == "Bind" and len(rest) >= 4:
                counts["statements"] += 1
                counts[f"  {named.get(rest[3], '?')}"] += 1
            elif kind == "Query" and len(rest) >= 2:
                counts["statements"] += 1
                counts[f"  {rest[1].split()[0].upper() if rest[1].split() else '?'}"] += 1
    return counts


def measure(base: str, runs: int, steps: int, postmaster: Any, trace: bool, profile: int) -> None:
    import bench_postgres as bench

    where = bench.fresh_schema(base)
    folder = Path(tempfile.mkdtemp(prefix="bench-wire-trace-"))
    if trace:
        _trace_connections(folder)
    from pyrula.journal.store import Store
    from pyrula.runtime import Worker, submit

    store = Store(where)
    try:
        handles = [submit(bench.steps, steps, store=store) for _ in range(runs)]
        for path in folder.glob("*.trace"):  # the submissions are not the steps
            path.write_text("")
        worker = Worker(store, poll_seconds=0.005, concurrency=max(runs, 1))
        profiler = cProfile.Profile() if profile else None
        threads0, wal0 = _thread_cpu(), _wal(base)
        server0, cpu0, wall0 = _server_cpu(postmaster), time.process_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        asyncio.run(worker.run(until_idle=True))
        if profiler is not None:
            profiler.disable()
        threads = {k: v - threads0.get(k, 0.0) for k, v in _thread_cpu().items()}
        wal = _wal(base) - wal0
        wall = time.perf_counter() - wall0
        cpu, server = time.process_time() - cpu0, _server_cpu(postmaster) - server0
        assert all(h.record.result == sum(range(steps)) for h in handles)
    finally:
        store.close()
    total = runs * steps
    load = os.getloadavg()[0]
    print(f"\n{runs} run(s) at once, {total} steps: {total / wall:.0f} steps/s (load {load:.1f})")
    per_step = f"worker {cpu / total * 1e6:.0f} us, server {server / total * 1e6:.0f} us"
    print(f"   CPU per step: {per_step}; WAL per step {wal / total:.0f} bytes")
    print(
        "   CPU per step by thread: "
        + ", ".join(
            f"{name} {seconds / total * 1e6:.0f} us" for name, seconds in sorted(threads.items())
        )
    )
    if trace:
        for name, n in sorted(_count(folder).items()):
            print(f"   {name:<24} {n / total:6.2f} per step")
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)


def commits(base: str, count: int) -> None:
    """`count` group commits of one fenced fact each, and nothing else: run it under callgrind
    twice (two counts) and divide the difference of instructions by the difference of counts."""
    import dataclasses

    import bench_postgres as bench

    from pyrula.journal.group_commit import MISSED, _Write, commit_group
    from pyrula.journal.store import Store

    named = {f.name for f in dataclasses.fields(_Write)}
    store = Store(bench.fresh_schema(base))
    store.write(lambda txn: txn.put(b"lease", b"mine", db="flags"))

    def write(n: int) -> Any:
        key = b"k%06d" % n

        def fast(txn: Any) -> Any:
            fence = (b"lease", b"mine", "flags")
            added = txn.put_fenced(key, b"v" * 200, db="events", after=None, fence=fence)
            return lambda: 1 if added() else MISSED

        # A tree from before `_Write.scope` (`--tree`) names its run `claim`, or nothing.
        if "scope" in named:
            return _Write(lambda txn: 0, fast, scope=key.decode())
        if "claim" in named:
            return _Write(lambda txn: 0, fast, claim=key)  # type: ignore[call-arg]
        return _Write(lambda txn: 0, fast)

    try:
        for n in range(count):
            assert commit_group(store, [write(n)]) == [(True, 1)]
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--runs", default="1,8")
    parser.add_argument("--steps", type=int, default=100, help="steps per run")
    parser.add_argument("--tree", help="import pyrula from this tree instead")
    parser.add_argument("--no-trace", action="store_true")
    parser.add_argument("--profile", type=int, default=0)
    parser.add_argument("--commits", type=int, default=0, help="only N group commits (callgrind)")
    opts = parser.parse_args()
    sys.path[:0] = [*([opts.tree] if opts.tree else []), str(ROOT / "benchmarks")]
    import pyrula

    print(f"pyrula from {pyrula.__file__}")
    base, postmaster = _server(opts.url)
    if opts.commits:
        commits(base, opts.commits)
        return
    for runs in (int(n) for n in opts.runs.split(",")):
        measure(base, runs, opts.steps, postmaster, not opts.no_trace, opts.profile)


if __name__ == "__main__":
    main()
