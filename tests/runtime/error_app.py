"""Workflows for the error-replay tests: each step's error decides a branch of the body."""

from __future__ import annotations

import asyncio
import functools
import os
from pathlib import Path
from typing import NoReturn

from pyrula.workflows import WorkflowContext, workflow
from tests.runtime.error_cases import CASES, Declined, branch_of


def _reraise(exc: BaseException) -> NoReturn:
    raise exc


def _log(path: str, line: str) -> str:
    with open(path, "a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())
    return line


async def _gate(marker: str, gate: str) -> None:
    """Say the run is here, then wait until the test opens the gate (a file appears)."""
    _log(marker, "at gate")
    while not Path(gate).exists():
        await asyncio.sleep(0.01)


@workflow(name="error_paths")
async def error_paths(ctx: WorkflowContext, order: list[str], log: str, gate: str) -> list[str]:
    branches = []
    for case in order:
        try:
            await ctx.step(f"raise-{case}", CASES[case])
            branch = "nothing raised"
        except Exception as exc:
            branch = branch_of(functools.partial(_reraise, exc))
        # The branch is in the step's name: a resume that takes another branch fails the run
        # with ReplayInputChanged instead of passing quietly.
        branches.append(await ctx.step(f"took {branch}", _log, log, f"{case}: {branch}"))
    await ctx.step("gate", _gate, log + ".marker", gate)
    return branches


@workflow(name="declines")
async def declines(ctx: WorkflowContext) -> str:
    raise Declined(402, "card declined")


@workflow(name="parent_of_declines")
async def parent_of_declines(ctx: WorkflowContext) -> str:
    try:
        await ctx.run_child(declines)
    except Declined as exc:
        return f"child declined with code {exc.code}"
    return "child succeeded"
