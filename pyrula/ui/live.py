"""Live updates as server-sent events (`text/event-stream`): new exchanges at the top of the
exchange list, and a run's timeline as its events land.

Each stream looks at the store's commit count (LMDB's last transaction id: no read) every
`POLL_SECONDS`, and reads only when it has moved. It ends when the client goes away (Starlette
cancels it on the disconnect), when the run it follows can no longer move on its own, and when
the server shuts down (`end_streams`: `pyrula ui`'s server calls it first, since uvicorn waits
for every open response before it stops).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from functools import partial
from typing import Any, TypeVar

from anyio import to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from pyrula.errors import PyrulaError
from pyrula.inspection.by_time import TimeOrder
from pyrula.inspection.pages import live_matches
from pyrula.journal.store import Store
from pyrula.runtime import RunStore
from pyrula.ui import exchanges, runs
from pyrula.ui.templating import templates

POLL_SECONDS = 0.2
HEARTBEAT_SECONDS = 15.0  # a comment line now and then: a proxy keeps the stream open
RETRY_MS = 1000  # how soon the browser reconnects after a stream ended

T = TypeVar("T")


def end_streams(app: Starlette) -> None:
    """End every live stream of `app` (and refuse new ones): the server is shutting down."""
    closing: threading.Event = app.state.closing
    closing.set()


def _event(kind: str, data: str) -> str:
    lines = [f"event: {kind}", *(f"data: {line}" for line in data.splitlines() or [""])]
    return "\n".join(lines) + "\n\n"


async def _changes(request: Request) -> AsyncGenerator[str | None]:
    """Yield None each time the store has committed since the last look, and a heartbeat
    comment when nothing has for a while; return when the server shuts down."""
    state = request.app.state
    store: Store = state.store
    closing: threading.Event = state.closing
    seen: object = None
    quiet_since = time.monotonic()
    state.live_streams += 1
    try:
        yield f"retry: {RETRY_MS}\n\n"
        pause = POLL_SECONDS
        while not closing.is_set():
            commits = store.commit_count()
            if commits is None or commits != seen:
                seen = commits
                began = time.monotonic()
                yield None
                # Reading what changed takes its time on a big store: look again only after
                # four times as long, so that a busy store keeps a stream reading a fifth of
                # the time at most.
                quiet_since = time.monotonic()
                pause = max(POLL_SECONDS, 4 * (quiet_since - began))
            elif time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                quiet_since = time.monotonic()
                yield ": still here\n\n"
            await _sleep(closing, pause)
    finally:
        state.live_streams -= 1


async def _sleep(closing: threading.Event, seconds: float) -> None:
    """Wait `seconds`, or less when the server shuts down meanwhile."""
    deadline = time.monotonic() + seconds
    while not closing.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.0)))


async def _off_loop(call: Callable[[], T]) -> T:
    """Read the store on a worker thread: the event loop serves the other pages meanwhile."""
    return await to_thread.run_sync(call)


# What a stream does when the store has changed: the events to send, and whether it is over.
OnChange = Callable[[], Awaitable[tuple[list[str], bool]]]


def _stream(request: Request, on_change: OnChange) -> Response:
    """The event stream that follows the store's changes (`_changes`), sending what
    `on_change` makes of each, until it says the stream is over."""

    async def events() -> AsyncIterator[str]:
        async with aclosing(_changes(request)) as changes:
            async for change in changes:
                if change is not None:  # the reconnect delay, a heartbeat
                    yield change
                    continue
                sent, over = await on_change()
                for event in sent:
                    yield event
                if over:
                    return

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _since(request: Request, order: TimeOrder) -> int | None:
    """Where the client's exchange stream starts: the arrival count its page was read at (or
    the last event it got, on a reconnect); None when the count is another server's."""
    mark = request.headers.get("last-event-id") or request.query_params.get("since", "")
    token, _, arrived = mark.partition(":")
    if token != order.token or not arrived.isdigit():
        return None
    return int(arrived)


async def exchange_stream(request: Request) -> Response:
    """New exchanges matching the list's filters, each as its row (`event: exchange`)."""
    order: TimeOrder = request.app.state.order
    query = exchanges.query_of(request)
    since = _since(request, order)

    arrived = since

    async def on_change() -> tuple[list[str], bool]:
        nonlocal arrived
        current = await _off_loop(order.refresh)
        if arrived is None:  # a stale mark: only what arrives from now on
            arrived = current
        if current == arrived:
            return [], False
        found, models = await _off_loop(partial(live_matches, order, query, arrived))
        arrived = current
        rows = [
            _event("exchange", templates.get_template("exchange_row.html").render(row=row))
            for row in exchanges.rows_of(found, models)
        ]
        # The last event carries the mark: a reconnect starts after the whole batch (a batch
        # cut short is sent again, and a row already shown is replaced, not repeated).
        return [*rows, f"id: {order.token}:{current}\n\n"], False

    return _stream(request, on_change)


async def run_stream(request: Request) -> Response:
    """A run's timeline, rendered again each time its events or its status change
    (`event: timeline`), until it can no longer move on its own (`event: end`)."""
    journal: RunStore = request.app.state.runs
    run_id = request.path_params["run_id"]
    shown = request.query_params.get("shown", "")

    def look() -> dict[str, Any]:
        return runs.timeline_context(request, journal.get(run_id))

    state = shown

    async def on_change() -> tuple[list[str], bool]:
        nonlocal state
        try:
            context = await _off_loop(look)
        except PyrulaError:  # purged meanwhile
            return [_event("end", "")], True
        sent = []
        if context["state"] != state:
            state = context["state"]
            html = templates.get_template("timeline.html").render({**context, "request": request})
            sent.append(_event("timeline", html))
        if not context["live"]:
            sent.append(_event("end", ""))
        return sent, not context["live"]

    return _stream(request, on_change)


routes = [
    Route("/live/exchanges", exchange_stream),
    Route("/live/runs/{run_id}", run_stream),
]
