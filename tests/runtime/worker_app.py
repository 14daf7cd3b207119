"""A workflow for the multi-worker tests (imported by `pyrula worker --import`)."""

from __future__ import annotations

import asyncio
import os

from pyrula.workflows import WorkflowContext, workflow


def _record(path: str, n: int) -> int:
    with open(path, "a") as log:
        log.write(f"{n}\n")
        log.flush()
        os.fsync(log.fileno())
    return n * 10


@workflow(name="exactly_once")
async def exactly_once(ctx: WorkflowContext, path: str, n: int) -> int:
    await asyncio.sleep(0.01)
    return await ctx.step("record", _record, path, n)
