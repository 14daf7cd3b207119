"""The server's side of a call (`pyrula.agents.mcp._calls`) on a PostgreSQL store: while it
waits for a served run, its looks at the run wait on the server off the event loop, so the
server's other calls go on meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

from pyrula.agents.mcp._calls import CallOptions, outcome, start
from pyrula.agents.mcp._tools import register_tools
from pyrula.journal.store import Store
from tests.fakes.postgres import HeldStore, fresh_url, while_held
from tests.runtime.support import drive


def mcp_calls_echo(word: str) -> str:
    """Say a word back."""
    return f"echo {word}"


def test_a_look_at_the_served_run_waits_on_the_server_off_the_loop() -> None:
    (served,) = register_tools([mcp_calls_echo])
    store = Store(fresh_url())
    try:
        handle = start(store, served, {"word": "hi"}, identity="anonymous", key=None)
        drive(store)  # a worker finishes the run: the first look finds it ended
        held = HeldStore(store.url, table="pyrula_runs", safety=10)  # every read of a run waits

        async def main() -> tuple[Any, int, int]:
            waiting = asyncio.ensure_future(outcome(handle, served, CallOptions()))
            still, ticks = await while_held(held, waiting, 1)
            return await waiting, still, ticks

        result, still, ticks = asyncio.run(main())
        assert result == "echo hi"
        assert still >= 1 and ticks > 0  # the look waited on the server; the loop ran
    finally:
        held.release()
        store.close()
