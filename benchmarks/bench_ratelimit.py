"""Rate limits: the overhead of an uncontended `LLMRate` slot, vs a bare `asyncio.Semaphore`.

An uncontended slot is what every live call under `rate_limit=` pays when its limits are not
reached: take the slot (check the queue is empty, refill and charge the buckets, count it in
flight), then release it. Limits are set far above the rate measured (1e12 requests and tokens
a minute, `max_concurrent=1_000_000`), so no call ever waits and all three checks run.

1. Async, on one event loop, one slot after the other:
   * baseline: `async with asyncio.Semaphore(1_000_000)`;
   * `async with rate.slot(key, 100)`, the drop-in's form;
   * `await rate.acquire(key, 100)` + `slot.release()`, the primitive.
2. Via a thread: the caller is a plain thread, the run's loop runs on another thread:
   * baseline: the same semaphore reached through the loop, as a naive sync twin would,
     `run_coroutine_threadsafe(sem.acquire(), loop).result()` then
     `loop.call_soon_threadsafe(sem.release)`;
   * `with rate.blocking_slot(key, 100, loop)`: uncontended, it takes the slot on the calling
     thread under the queue's lock, with no hop to the loop;
   * for scale, the hop a waiting sync caller makes: the slot's acquire coroutine run through
     the loop with `run_coroutine_threadsafe` (the uncontended work plus one round trip).

Each variant runs in slices of `--ops` operations, interleaved with the order rotating
(`_common.run_rounds`); CPU time is the whole process's, so the loop thread's share counts.

Run: python benchmarks/bench_ratelimit.py [--rounds 5] [--ops 20000] [--slices 4]
"""

from __future__ import annotations

import asyncio
import os
import platform
import threading

from _common import console, parser, rate_table, run_rounds

import pyrula
from pyrula.runtime import LLMRate

HIGH = 1e12  # a minute's allowance no benchmark gets near
ESTIMATE = 100


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--ops", type=int, default=20_000, help="operations per slice")
    args.add_argument("--slices", type=int, default=4, help="slices per round and variant")
    opts = args.parse_args()
    ops: int = opts.ops
    console.rule("[bold]bench_ratelimit: uncontended slot overhead")
    facts = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "pyrula": pyrula.__version__,
        "rounds": opts.rounds,
        "slices": opts.slices,
        "ops/slice": ops,
    }
    console.print(", ".join(f"{k} {v}" for k, v in facts.items()))

    rate = LLMRate(HIGH, HIGH, 1_000_000, key="bench")

    # 1. async, on this thread's loop
    loop = asyncio.new_event_loop()
    semaphore = asyncio.Semaphore(1_000_000)

    async def semaphore_loop() -> int:
        for _ in range(ops):
            async with semaphore:
                pass
        return ops

    async def slot_loop() -> int:
        for _ in range(ops):
            async with rate.slot("openai", ESTIMATE):
                pass
        return ops

    async def acquire_loop() -> int:
        for _ in range(ops):
            (await rate.acquire("openai", ESTIMATE)).release()
        return ops

    async_results = run_rounds(
        {
            "Semaphore (base)": lambda: loop.run_until_complete(semaphore_loop()),
            "rate.slot()": lambda: loop.run_until_complete(slot_loop()),
            "rate.acquire()+release()": lambda: loop.run_until_complete(acquire_loop()),
        },
        opts.rounds,
        slices=opts.slices,
        label="async",
    )
    loop.close()

    # 2. via a thread: the run's loop on its own thread, the caller on this one
    run_loop = asyncio.new_event_loop()
    runner = threading.Thread(target=run_loop.run_forever, daemon=True)
    runner.start()
    loop_semaphore = asyncio.Semaphore(1_000_000)
    queue = rate._queue("openai")

    def semaphore_hop() -> int:
        for _ in range(ops):
            asyncio.run_coroutine_threadsafe(loop_semaphore.acquire(), run_loop).result()
            run_loop.call_soon_threadsafe(loop_semaphore.release)
        return ops

    def blocking_slot() -> int:
        for _ in range(ops):
            with rate.blocking_slot("openai", ESTIMATE, run_loop):
                pass
        return ops

    def slot_hop() -> int:
        for _ in range(ops):
            asyncio.run_coroutine_threadsafe(queue.acquire(ESTIMATE), run_loop).result().release()
        return ops

    thread_results = run_rounds(
        {
            "Semaphore via loop (base)": semaphore_hop,
            "rate.blocking_slot()": blocking_slot,
            "rate acquire via loop": slot_hop,
        },
        opts.rounds,
        slices=opts.slices,
        label="thread",
    )
    run_loop.call_soon_threadsafe(run_loop.stop)
    runner.join()
    run_loop.close()

    console.print()
    console.print(
        rate_table(
            "1. async, one loop: acquire + release",
            async_results,
            "Semaphore (base)",
            unit="slot",
        )
    )
    console.print(
        rate_table(
            "2. via a thread (the loop on another thread): acquire + release",
            thread_results,
            "Semaphore via loop (base)",
            unit="slot",
        )
    )


if __name__ == "__main__":
    main()
