"""Async runs on PostgreSQL: store calls off the event loop (`journal.async_store`) against the
same calls made in place on the loop (what every async path did before).

One throwaway PostgreSQL 16 (`pgserver`, unix socket, `synchronous_commit=on`) or `--url`; a
fresh schema per variant; the two variants interleaved round by round, medians printed with
the "in place" variant as the baseline of the same rounds. "in place" is the same code with
`async_store.remote` answering False, so every store call is made on the loop.

1. fan-out: one run whose body makes `--width` async model calls at once (openai SDK through
   the journaling transport, an in-process stand-in provider), `--rounds-per-run` times:
   journaled calls/s and process CPU per call; then the same run again with a heartbeat task
   on the run's loop, for the loop's longest stall (the longest gap between two of its turns:
   how long every other task of the loop waited). The heartbeat spins, so it only runs in the
   second run, apart from the CPU figure.
2. steps/s and process CPU per step of a 100-step workflow, one run (the cancel check of each
   step now goes through a store thread: its cost).

Run: python benchmarks/bench_async_pg.py [--rounds 3] [--width 8] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import openai

from pyrula.journal import async_store
from pyrula.journal.store import Store
from pyrula.runtime import Worker, submit
from pyrula.workflows import WorkflowContext, workflow

ROOT = Path(__file__).parents[1]
sys.path.insert(1, str(ROOT / "benchmarks"))

from _common import async_openai_client, completion_json, json_response  # noqa: E402
from bench_postgres import fresh_schema  # noqa: E402

STALL: dict[str, float] = {}


def _client() -> openai.AsyncOpenAI:
    import pyrula

    def reply(request: httpx.Request) -> httpx.Response:
        return json_response(completion_json("ok"))

    return async_openai_client(
        pyrula.AsyncHttpxTransport(httpx.MockTransport(reply)), api_key="sk-bench"
    )


@workflow(name="bench_async.fan_out")
async def fan_out(ctx: WorkflowContext, width: int, rounds: int, beat: bool) -> int:
    client = _client()
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
    for r in range(rounds):
        await asyncio.gather(
            *(
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"r{r} c{i}"}]
                )
                for i in range(width)
            )
        )
    stop.set()
    if beating is not None:
        await beating
        STALL["longest"] = longest
    return width * rounds


@workflow(name="bench_async.steps")
async def steps(ctx: WorkflowContext, n: int) -> int:
    for i in range(n):
        await ctx.step(f"s{i}", int, i)
    return n


def one(base: str, workflow_: Any, *args: Any) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and the result of one run, submission to end."""
    store = Store(fresh_schema(base))
    try:
        worker = Worker(store, poll_seconds=0.005)
        wall, cpu = time.perf_counter(), time.process_time()
        handle = submit(workflow_, *args, store=store)
        asyncio.run(worker.run(until_idle=True))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert handle.record.status == "completed", handle.record.error
        return wall, cpu, int(handle.record.result)
    finally:
        store.close()


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--rounds", type=int, default=3)
    cli.add_argument("--width", type=int, default=8)
    cli.add_argument("--rounds-per-run", type=int, default=25)
    cli.add_argument("--url")
    args = cli.parse_args()
    base = args.url
    if base is None:
        from pgserver.postgres_server import get_server

        folder = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        base = str(get_server(folder, cleanup_mode="delete").get_uri())
    offloaded = async_store.remote
    variants = {"off the loop": offloaded, "in place": lambda store: False}
    rows: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    for _ in range(args.rounds):
        for name, remote in variants.items():
            async_store.remote = remote  # type: ignore[assignment]
            try:
                wall, cpu, calls = one(base, fan_out, args.width, args.rounds_per_run, False)
                row = rows[name]
                row.setdefault("calls/s", []).append(calls / wall)
                row.setdefault("CPU ms/call", []).append(cpu * 1000 / calls)
                one(base, fan_out, args.width, args.rounds_per_run, True)
                row.setdefault("longest stall ms", []).append(STALL["longest"] * 1000)
                wall, cpu, n = one(base, steps, 100)
                row.setdefault("steps/s", []).append(n / wall)
                row.setdefault("CPU ms/step", []).append(cpu * 1000 / n)
            finally:
                async_store.remote = offloaded
    print(
        f"async runs on PostgreSQL ({args.rounds} rounds, {args.width} calls at once x "
        f"{args.rounds_per_run}; medians; ratio to 'in place' in the same rounds)"
    )
    for metric in ("calls/s", "CPU ms/call", "longest stall ms", "steps/s", "CPU ms/step"):
        base_value = statistics.median(rows["in place"][metric])
        for name in variants:
            value = statistics.median(rows[name][metric])
            print(f"  {metric:18} {name:13} {value:10.2f}  x{value / base_value:.2f}")


if __name__ == "__main__":
    main()
