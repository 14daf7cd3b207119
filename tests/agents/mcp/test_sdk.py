"""A served tool's handler (`pyrula.agents.mcp._sdk`) on a PostgreSQL store: the submission of
its call's run, each look at the run while it waits for it (`_calls.outcome`), and the cancel of
a call its client cancelled wait on the server off the event loop, so the server's other calls
go on meanwhile."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pyrula.agents.mcp._calls import CallOptions
from pyrula.agents.mcp._sdk import _handler
from pyrula.agents.mcp._tools import register_tools
from pyrula.journal.store import Store
from pyrula.runtime import RunStore
from tests.fakes.postgres import HeldStore, fresh_url, while_held
from tests.runtime.support import drive


def mcp_sdk_echo(word: str) -> str:
    """Say a word back."""
    return f"echo {word}"


def _echo_handler(store: Store, options: CallOptions | None = None) -> Any:
    """The handler `build_mcp_server` makes for `mcp_sdk_echo`, with no idempotency key and
    the anonymous caller."""
    (served,) = register_tools([mcp_sdk_echo])
    return _handler(
        served,
        store,
        options or CallOptions(),
        lambda ctx: None,
        lambda ctx: "anonymous",
        object,
        RuntimeError,
    )


async def _until_submitted(store: Store) -> None:
    """Until the call's run is on the store (looked at from a thread: the loop stays free)."""
    while not await asyncio.to_thread(lambda: bool(list(RunStore(store).runs()))):
        await asyncio.sleep(0.01)


def test_a_calls_submission_and_its_looks_at_the_run_wait_on_the_server_off_the_loop() -> None:
    store = Store(fresh_url())
    handler = _echo_handler(store)
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


def _cancelled_by_client() -> Any:
    """A request context as the mcp SDK (2.x) leaves it when the client sent
    `notifications/cancelled` for the request."""
    cancelled = asyncio.Event()
    cancelled.set()
    outbound = SimpleNamespace(cancel_requested=cancelled)
    return SimpleNamespace(
        request_context=SimpleNamespace(session=SimpleNamespace(_request_outbound=outbound))
    )


def test_a_call_its_client_cancelled_writes_the_runs_cancel_off_the_loop() -> None:
    store = Store(fresh_url())
    handler = _echo_handler(store)

    async def main() -> tuple[int, int]:
        calling = asyncio.ensure_future(
            handler(word="hi", pyrula_mcp_context=_cancelled_by_client())
        )
        await _until_submitted(store)
        held = HeldStore(store.url, safety=10)  # every write waits now: the run's cancel
        try:
            calling.cancel()
            seen = await while_held(held, calling, 1)
        finally:
            held.release()
        with pytest.raises(asyncio.CancelledError):
            await calling
        return seen

    try:
        still, ticks = asyncio.run(main())
        # The cancel waited on the server while the loop kept turning, and then was written.
        assert still >= 1 and ticks > 0, (still, ticks)
        (run,) = RunStore(store).runs()
        assert run.cancel_requested
    finally:
        store.close()


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wake-ups' fallback never comes round within a test: only a NOTIFY (or a waiter's
    own deadline) can wake a waiting call."""
    monkeypatch.setattr("pyrula.journal.wakeups.WAKE_FALLBACK_SECONDS", 600.0)


@pytest.mark.usefixtures("no_fallback")
def test_a_waiting_call_on_postgresql_looks_again_when_its_run_ends_not_by_polling() -> None:
    # Nor does the poll interval: only the NOTIFY of the run's end can wake the waiting call.
    store = Store(fresh_url())
    handler = _echo_handler(store, CallOptions(poll_seconds=600.0))

    async def main() -> Any:
        calling = asyncio.ensure_future(handler(word="hi", pyrula_mcp_context=None))
        await _until_submitted(store)
        await asyncio.to_thread(drive, store)  # a worker runs the call to its end
        return await asyncio.wait_for(calling, 60)

    try:
        assert asyncio.run(main()) == "echo hi"
    finally:
        store.close()


@pytest.mark.usefixtures("no_fallback")
def test_a_call_no_worker_takes_on_postgresql_ends_at_its_worker_deadline_not_the_fallback():
    # Nothing announces that no worker came: the wait is cut at the call's own deadline.
    store = Store(fresh_url())
    handler = _echo_handler(store, CallOptions(worker_timeout=0.2, poll_seconds=0.05))

    async def main() -> Any:
        return await asyncio.wait_for(handler(word="hi", pyrula_mcp_context=None), 60)

    try:
        with pytest.raises(RuntimeError, match="no worker took run"):
            asyncio.run(main())
        (run,) = RunStore(store).runs()
        assert run.status == "queued"  # left for a worker, as the error says
    finally:
        store.close()
