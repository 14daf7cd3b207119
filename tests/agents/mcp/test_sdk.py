"""A served tool's handler (`pyrula.agents.mcp._sdk`) on a PostgreSQL store: the submission of
its call's run waits on the server off the event loop, as its looks at the run do."""

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


def test_a_calls_submission_waits_on_the_server_off_the_loop() -> None:
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
    held = HeldStore(store.url, safety=10)  # every write of the store waits

    async def main() -> tuple[Any, int, int]:
        calling = asyncio.ensure_future(handler(word="hi", pyrula_mcp_context=None))
        still, ticks = await while_held(held, calling, 1)
        await asyncio.to_thread(drive, store)  # a worker runs the submitted call
        return await calling, still, ticks

    try:
        result, still, ticks = asyncio.run(main())
        assert result == "echo hi"
        assert still >= 1 and ticks > 0  # the submission waited on the server; the loop ran
    finally:
        held.release()
        store.close()
