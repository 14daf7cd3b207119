"""A workflow for the crash tests, and a zygote that forks real worker processes on demand.

The zygote imports everything once and never opens the store, so each forked worker starts in
milliseconds and opens the store fresh: killing it with SIGKILL is a real process death.
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx

import pyrula
from pyrula.workflows import WorkflowContext, workflow

STEPS = 40


def _append(path: str, line: str) -> None:
    with open(path, "a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


@workflow(name="crashy")
async def crashy(ctx: WorkflowContext, log_path: str, provider: str) -> int:
    client = httpx.AsyncClient(transport=pyrula.AsyncHttpxTransport())
    total = 0

    async def side_effect(i: int) -> int:
        _append(log_path, f"step {i}")
        await asyncio.sleep(0.002)
        return i * i

    for i in range(STEPS):
        total += await ctx.step(f"s{i}", side_effect, i)
        if i % 5 == 4:
            reply = await client.post(
                f"{provider}/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": f"call {i}"}]},
            )
            total += len(reply.json()["choices"][0]["message"]["content"])
    return total


def _worker(store: str) -> None:
    from pyrula.runtime import Worker

    asyncio.run(Worker(store, lease_seconds=30, poll_seconds=0.005).run(until_idle=True))


def zygote() -> None:
    """Commands on stdin: `fork STORE` prints a worker pid; `reap PID` prints its exit status."""
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "fork":
            pid = os.fork()
            if pid == 0:
                try:
                    _worker(argument)
                    os._exit(0)
                except BaseException:
                    os._exit(1)
            print(pid, flush=True)
        elif command == "reap":
            _, status = os.waitpid(int(argument), 0)
            print(status, flush=True)


if __name__ == "__main__":
    zygote()
