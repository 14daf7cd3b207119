"""A served tool's handler (`pyrula.agents.mcp._sdk`) on a PostgreSQL store: the submission of
its call's run, and each look at the run while it waits for it (`_calls.outcome`), wait on the
server off the event loop, so the server's other calls go on meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

from pyrula.agents.mcp._calls import CallOptions
from pyrula.agents.mcp._sdk import _handler
from pyrula.agents.mcp._tools import register_tools
from pyrula.journal.store import Store
from tests.fakes.postgres import HeldStore, fresh_url, while_held
from tests.runtime.support import drive


def mcp_sdk_echo(word: str) -> str:
    """Say a word back."""
    return f"echo {word}"


def test_a_calls_submission_and_its_looks_at_the_run_wait_on_the_server_off_the_loop() -> None:
    (served,) = register_tools([mcp_sdk_echo])
    store = Store(fresh_url())
    handler = _handler(
        served,
        store,
        CallOptions(),
        lambda ctx: None,  # no idempotency key
        lambda ctx: "anonymous",
        object,
        RuntimeError,
    )
    helds = [HeldStore(store.url, safety=10)]  # every write of the store waits: the submission

    async def main() -> tuple[Any, list[tuple[int, int]]]:
        calling = asyncio.ensure_future(handler(word="hi", pyrula_mcp_context=None))
        seen = [await while_held(helds[0], calling, 1)]
        # Submitted; no worker has it yet. Every read of a run waits now: the next look.
        helds.append(HeldStore(store.url, table="pyrula_runs", safety=10))
        seen.append(await while_held(helds[1], calling, 1))
        await asyncio.to_thread(drive, store)  # a worker runs the submitted call
        return await calling, seen

    try:
        result, seen = asyncio.run(main())
        assert result == "echo hi"
        # Each waited on the server while the loop kept turning: (waiting, ticks) per hold.
        assert all(still >= 1 and ticks > 0 for still, ticks in seen), seen
    finally:
        for held in helds:
            held.release()
        store.close()
