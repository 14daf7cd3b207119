"""One point read of a PostgreSQL store from an event loop, three ways: in place on the loop (a
blocking psycopg call), on a store thread (`journal.async_store.acall`, what the runtime does),
and with psycopg's own async API (`psycopg_pool.AsyncConnectionPool`, the I/O awaited on the
loop, no thread). What each costs in CPU and wall time per read, and how long the loop stops.

One throwaway PostgreSQL 16 (`pgserver`, unix socket) or `--url`; the store's `flags` table
holds the key read (a cancel flag, what a run's every step reads). Variants interleaved round by
round; medians, with "in place" as the baseline of the same rounds.

- lone: one read after another (a single run's cancel check per step);
- 8 at once: `--width` reads gathered, as the runs of a busy worker's loop would ask together.

The loop's longest stall is the longest gap between two turns of a heartbeat task on the loop
while the reads run (the heartbeat spins, so its own CPU is left out: it runs in a separate
pass over the same reads).

Then the read in context: steps/s and process CPU per step of a lone run's 100-step workflow
(each step's cancel check is a lone read of `journal.group_read`), with that read on the group
reader's thread (the code now) against read on the loop (the rule before: a key asked alone
was read in place), alternated round by round in this process.

Run: python benchmarks/bench_pg_reads.py [--rounds 5] [--reads 2000] [--width 8] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg_pool

from pyrula.journal import group_read
from pyrula.journal.async_store import acall
from pyrula.journal.store import Store
from pyrula.runtime import Worker, submit
from pyrula.workflows import WorkflowContext, workflow

ROOT = Path(__file__).parents[1]
sys.path.insert(1, str(ROOT / "benchmarks"))

from bench_postgres import fresh_schema, server_url  # noqa: E402

KEY = b"cancel:run-1"
Read = Callable[[], Awaitable[Any]]


def readers(store: Store, pool: psycopg_pool.AsyncConnectionPool) -> dict[str, Read]:
    flags = store.db("flags")

    async def in_place() -> Any:
        return store.get(flags, KEY)

    async def store_thread() -> Any:
        return await acall(store, store.get, flags, KEY)

    async def psycopg_async() -> Any:
        async with pool.connection() as conn:
            cursor = await conn.execute("SELECT v FROM pyrula_flags WHERE k = %b", (KEY,))
            return await cursor.fetchone()

    return {"in place": in_place, "store thread": store_thread, "psycopg async": psycopg_async}


async def timed(read: Read, reads: int, width: int, beat: bool) -> tuple[float, float, float]:
    """Wall and CPU seconds for `reads` reads, `width` at a time, and the loop's longest stall
    (with `beat`)."""
    last, longest = time.perf_counter(), 0.0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal last, longest
        while not stop.is_set():
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now
            await asyncio.sleep(0)

    beating = asyncio.ensure_future(heartbeat()) if beat else None
    await asyncio.sleep(0)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(reads // width):
        if width == 1:
            await read()
        else:
            await asyncio.gather(*(read() for _ in range(width)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stop.set()
    if beating is not None:
        await beating
    return wall, cpu, longest


async def measure(url: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """One round: every variant, lone and `width` at once."""
    store = Store(url)
    store.write(lambda txn: txn.put(KEY, b"1", db=store.db("flags")))
    pool = psycopg_pool.AsyncConnectionPool(
        url, min_size=1, max_size=args.width, kwargs={"autocommit": True}, open=False
    )
    await pool.open()
    out: dict[str, dict[str, float]] = {}
    try:
        for name, read in readers(store, pool).items():
            for width in (1, args.width):
                await timed(read, args.width * 4, width, False)  # warm: connections opened
                wall, cpu, _ = await timed(read, args.reads, width, False)
                _, _, stall = await timed(read, args.reads, width, True)
                label = "lone" if width == 1 else f"{width} at once"
                out[f"{name}|{label}"] = {
                    "reads/s": args.reads / wall,
                    "CPU us/read": cpu * 1e6 / args.reads,
                    "stall ms": stall * 1000,
                }
    finally:
        await pool.close()
        store.close()
    return out


@workflow(name="bench_pg_reads.steps")
async def steps(ctx: WorkflowContext, n: int) -> int:
    for i in range(n):
        await ctx.step(f"s{i}", int, i)
    return n


_ON_THREAD = group_read.GroupRead.reads_in_place


def _lone_on_the_loop(self: Any, size: int) -> bool:
    """The rule before: a key asked alone is read on the loop at once."""
    return size == 1


def lone_run(base: str, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Steps/s and CPU ms per step of one 100-step run, each way of reading a lone key."""
    ways = {"reader thread": _ON_THREAD, "on the loop": _lone_on_the_loop}
    found: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, in_place in ways.items():
            group_read.GroupRead.reads_in_place = in_place  # type: ignore[method-assign]
            store = Store(fresh_schema(base))
            try:
                wall, cpu = time.perf_counter(), time.process_time()
                handle = submit(steps, 100, store=store)
                asyncio.run(Worker(store, poll_seconds=0.005).run(until_idle=True))
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                assert handle.record.status == "completed", handle.record.error
                found[way].append((100 / wall, cpu * 1000 / 100))
            finally:
                group_read.GroupRead.reads_in_place = _ON_THREAD  # type: ignore[method-assign]
                store.close()
    return found


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=5)
    cli.add_argument("--reads", type=int, default=2000)
    cli.add_argument("--width", type=int, default=8)
    cli.add_argument("--url")
    args = cli.parse_args()
    base = server_url(args.url)
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.rounds):
        found = asyncio.run(measure(fresh_schema(base), args))
        for variant, metrics in found.items():
            for metric, value in metrics.items():
                rows.setdefault(variant, {}).setdefault(metric, []).append(value)
    print(
        f"point reads of a PostgreSQL store from an event loop ({args.rounds} rounds of "
        f"{args.reads} reads; medians; ratio to 'in place' of the same shape)"
    )
    for variant in rows:
        name, shape = variant.split("|")
        for metric, values in rows[variant].items():
            value = statistics.median(values)
            base_value = statistics.median(rows[f"in place|{shape}"][metric])
            ratio = value / base_value if base_value else float("nan")
            print(f"  {shape:10} {metric:12} {name:14} {value:10.1f}  x{ratio:.2f}")
    runs = lone_run(base, args.rounds * 2)
    print(f"a lone run's 100 steps ({args.rounds * 2} rounds; medians; ratio to 'on the loop')")
    for index, metric in enumerate(("steps/s", "CPU ms/step")):
        then = statistics.median(v[index] for v in runs["on the loop"])
        for way, measured in runs.items():
            value = statistics.median(v[index] for v in measured)
            print(f"  {metric:12} lone read {way:14} {value:8.3f}  x{value / then:.2f}")


if __name__ == "__main__":
    main()
