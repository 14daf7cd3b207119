"""A workflow for the multi-worker tests (imported by `pyrula worker --import`)."""

from __future__ import annotations

import asyncio
import os
import time

import httpx

import pyrula
from pyrula.runtime import fact_log
from pyrula.workflows import WorkflowContext, workflow

if os.environ.get("PYRULA_TEST_NO_TIMED_FOLD"):
    fact_log.FOLD_SECONDS = 3600.0  # the logged facts stay in the log until the test kills it


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


# -- for the service tests: a run that blocks in a step until the test opens its gate -----------


async def _gated_effect(log_path: str, gates: str, i: int) -> int:
    """Note the start, wait for the gate file `gates/<i>`, note the end: a side effect in two
    halves, so a test sees which steps ran, were cut short and ran again."""
    _line(log_path, f"start {i}")
    while not os.path.exists(os.path.join(gates, str(i))):
        await asyncio.sleep(0.005)
    _line(log_path, f"done {i}")
    return i


def _line(path: str, text: str) -> None:
    with open(path, "a") as log:
        log.write(text + "\n")
        log.flush()
        os.fsync(log.fileno())


@workflow(name="gated")
async def gated(ctx: WorkflowContext, log_path: str, gates: str, steps: int) -> int:
    total = 0
    for i in range(steps):
        total += await ctx.step(f"s{i}", _gated_effect, log_path, gates, i)
    return total


@workflow(name="fails")
async def fails(ctx: WorkflowContext) -> None:
    raise ValueError("no such order")


@workflow(name="asks")
async def asks(ctx: WorkflowContext) -> str:
    answer = await ctx.interrupt("proceed?")
    return f"told {answer}"


# -- for the async tests: concurrent async model calls around a step that waits for a gate ------


async def _ask(client: httpx.AsyncClient, provider: str, question: str) -> str:
    reply = await client.post(
        f"{provider}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": question}]},
    )
    return str(reply.json()["choices"][0]["message"]["content"])


async def _gate(path: str) -> None:
    while not os.path.exists(path):
        await asyncio.sleep(0.005)


@workflow(name="fan_out")
async def fan_out(ctx: WorkflowContext, provider: str, log_path: str, gate: str, n: int) -> list:
    """`n` async model calls at once, a noted step, a step held until `gate` exists, and `n`
    more calls at once."""
    client = httpx.AsyncClient(transport=pyrula.AsyncHttpxTransport())
    first = await asyncio.gather(*(_ask(client, provider, f"a{i}") for i in range(n)))
    await ctx.step("noted", _line, log_path, "noted")
    await ctx.step("gate", _gate, gate)
    second = await asyncio.gather(*(_ask(client, provider, f"b{i}") for i in range(n)))
    return [*first, *second]


# -- for the fact log's test: steps that run fast, then one that hangs until the worker is killed -


def _fast_effect(log_path: str, hang: str, i: int) -> int:
    _line(log_path, f"step {i}")
    while os.path.exists(hang) and i == FAST_HANG_AT:
        time.sleep(0.01)  # killed here
    return i


FAST_STEPS, FAST_HANG_AT = 12, 8


@workflow(name="fast_steps")
async def fast_steps(ctx: WorkflowContext, log_path: str, hang: str) -> int:
    total = 0
    for i in range(FAST_STEPS):
        total += await ctx.step(f"s{i}", _fast_effect, log_path, hang, i)
    return total


# -- for the emit and signal tests: progress events and a signal around a step that waits -------


@workflow(name="reports")
async def reports(
    ctx: WorkflowContext, log_path: str, gates: str, target: str, before: list, after: list
) -> str:
    """Each of `before` ("emit": a progress event; "send": signal `poke` to `target`), the
    step `s0` held until the gate file `gates/0` exists, then each of `after`."""
    for n, what in enumerate([*before, "step", *after]):
        if what == "emit":
            await ctx.emit("progress", {"n": n})
        elif what == "send":
            await ctx.send_signal(target, "poke", {"from": ctx.run_id, "n": n})
        else:
            await ctx.step("s0", _gated_effect, log_path, gates, 0)
    return "reported"


# -- for the cut-off host test: a step whose body waits inside an open write transaction ---------


def _inside_a_write(url: str, log_path: str, gates: str, i: int) -> int:
    """Open a write on the run's store (the store's lock, held exclusively), read in it, note
    `inside <i>`, then wait for the gate `gates/<i>` before writing: a host cut off meanwhile
    leaves that transaction open on the server, with its lock."""
    from pyrula.journal.store import Store

    def body(txn) -> None:
        txn.get(b"cut", db="flags")  # answered: the server now counts the transaction idle
        _line(log_path, f"inside {i}")
        while not os.path.exists(os.path.join(gates, str(i))):
            time.sleep(0.005)
        txn.put(b"cut", str(i).encode(), db="flags")

    with Store(url) as store:
        store.write(body)
    _line(log_path, f"done {i}")
    return i


@workflow(name="held_in_a_write")
async def held_in_a_write(ctx: WorkflowContext, url: str, log_path: str, gates: str) -> int:
    first = await ctx.step("s0", _gated_effect, log_path, gates, 0)
    second = await ctx.step("s1", _inside_a_write, url, log_path, gates, 1)
    return first + second + await ctx.step("s2", _gated_effect, log_path, gates, 2)
