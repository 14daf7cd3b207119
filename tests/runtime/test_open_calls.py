"""A model call still open when an attempt ends is metered once, before the closing event, and
nothing is written for it afterwards; a reply landing after the run ended is logged."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

from pyrula.agents import AgentContext, agent
from pyrula.runtime import RunStore, answer
from tests.fakes.openai_api import chat_sse
from tests.fakes.provider import sse_reply
from tests.runtime.support import (
    async_openai,
    chat_upstream,
    drive,
    new_store,
    run_to_rest,
    sync_openai,
)

STREAMING = chat_upstream()
STREAMING.reply = lambda request: sse_reply(chat_sse("one two three four"))


async def _open_stream(question: str):  # read one chunk, then walk away
    stream = await async_openai(STREAMING).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": question}],
        stream=True,
        max_tokens=40,
    )
    async for _ in stream:
        break
    return stream


@agent(name="parks_mid_stream")
async def parks_mid_stream(ctx: AgentContext) -> str:
    kept = await _open_stream("park")  # still open, and referenced, when the run parks
    verdict = await ctx.interrupt("go on?")
    del kept
    return str(verdict)


def _spend(handle) -> list[tuple[int, str]]:
    return [
        (e.seq, e.type)
        for e in handle.events()
        if e.type in ("llm:done", "run:parked", "run:done", "run:attempt")
    ]


def test_a_stream_open_when_the_run_parks_is_metered_once_before_it_parks(caplog):
    STREAMING.calls.clear()
    store = new_store()
    with caplog.at_level(logging.ERROR):
        handle = run_to_rest(parks_mid_stream, store=store)
        gc.collect()
    kinds = [kind for _, kind in _spend(handle)]
    assert kinds == ["run:attempt", "llm:done", "run:parked"]
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert done[0]["estimated"] is True and done[0]["total_tokens"] >= 40

    answer(handle.id, "yes", store=store)
    drive(store)
    gc.collect()
    # The stream was never journaled, so the resumed body sent it again: two calls, two charges.
    assert len(STREAMING.calls) == 2
    assert [kind for _, kind in _spend(handle)].count("llm:done") == 2
    assert _spend(handle)[-1][1] == "run:done"
    assert "never retrieved" not in caplog.text and "RunAttemptEnded" not in caplog.text


@agent(name="returns_mid_stream")
async def returns_mid_stream(ctx: AgentContext) -> str:
    ctx_stream = await _open_stream("return")
    ctx_stream.response  # noqa: B018  (kept open, never closed)
    return "done reading"


def test_a_stream_dropped_without_close_is_metered_once_when_the_run_ends():
    handle = run_to_rest(returns_mid_stream)
    gc.collect()
    kinds = [kind for _, kind in _spend(handle)]
    assert kinds == ["run:attempt", "llm:done", "run:done"]


SLOW = chat_upstream()
LEFT_RUNNING: list[asyncio.Future[None]] = []


@agent(name="leaves_a_sync_call_running")
async def leaves_a_sync_call_running(ctx: AgentContext) -> str:
    client = sync_openai(SLOW)

    def ask() -> None:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "late"}]
        )

    LEFT_RUNNING.append(asyncio.ensure_future(ctx.to_thread(ask)))  # never awaited
    while not SLOW.calls:  # the request has reached the provider
        await asyncio.sleep(0.005)
    return "gone"


def test_a_reply_after_the_run_ended_is_logged_not_written(caplog):
    store = new_store()
    runs = RunStore(store)
    answered = chat_upstream().reply

    def after_the_end(request):
        # The provider answers only once the run's terminal event is on disk.
        while not any(r.status == "completed" for r in runs.runs()):
            time.sleep(0.005)
        return answered(request)

    SLOW.reply = after_the_end
    with caplog.at_level(logging.WARNING, logger="pyrula.runtime"):
        handle = run_to_rest(leaves_a_sync_call_running, store=store)
    assert handle.record.status == "completed"
    assert "model_spend_after_terminal" in caplog.text
    events = handle.events()
    assert events[-1].type == "run:done"  # nothing was written after the terminal event
    assert [e for e in events if e.type == "llm:done"] == []  # its reply had not begun
    assert "not counted" in caplog.text
