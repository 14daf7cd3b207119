"""LLMRate: fair, shared client-side rate limits, on a clock the tests advance by hand."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pyrula.agents import AgentContext, LLMRate, agent
from pyrula.errors import RunAttemptEnded
from pyrula.runtime.calls import CallFrame, current_run, in_call, replays
from pyrula.runtime.ratelimit import Slot, estimate_tokens
from tests.runtime.support import (
    ask,
    async_openai,
    chat_upstream,
    drive,
    new_store,
    run_to_rest,
    sync_openai,
)

_keys = itertools.count()


@pytest.fixture
def key() -> str:
    # Queues are shared per key for the whole process: each test gets a key of its own.
    return f"test-ratelimit-{next(_keys)}"


class _Timer:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Time that moves only when a test advances it; due timers fire on the caller's thread."""

    def __init__(self) -> None:
        self.time = 1000.0
        self.timers: list[_Timer] = []

    def now(self) -> float:
        return self.time

    def call_later(
        self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], None]
    ) -> _Timer:
        timer = _Timer(self.time + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.time += seconds
        due = sorted(
            (t for t in self.timers if not t.cancelled and t.when <= self.time),
            key=lambda t: t.when,
        )
        self.timers = [t for t in self.timers if not t.cancelled and t not in due]
        for timer in due:
            timer.callback()


async def spin() -> None:
    """Let every ready task run (wakes go through call_soon, a hop or two each)."""
    for _ in range(20):
        await asyncio.sleep(0)


def start(rate: LLMRate, key: str, estimate: int, got: list[Any], name: str) -> asyncio.Task[Slot]:
    async def take() -> Slot:
        slot = await rate.acquire(key, estimate)
        got.append(name)
        return slot

    return asyncio.ensure_future(take())


def test_waiters_are_served_first_come_first_served(key):
    async def main() -> list[str]:
        clock = ManualClock()
        rate = LLMRate(max_concurrent=1, clock=clock)
        first = await rate.acquire(key, 1)
        got: list[str] = []
        tasks = []
        for name in ("b", "c", "d"):
            tasks.append(start(rate, key, 1, got, name))
            await spin()
        assert got == []
        for task in tasks:
            first.release()
            first = await task
        return got

    assert asyncio.run(main()) == ["b", "c", "d"]


def test_a_small_call_does_not_overtake_a_large_one_waiting_for_tokens(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(tokens_per_minute=600, key=key, clock=clock)  # 10 tokens a second
        await rate.acquire(key, 600)
        got: list[str] = []
        big = start(rate, key, 300, got, "big")
        await spin()
        small = start(rate, key, 10, got, "small")
        await spin()
        clock.advance(5)  # 50 tokens: enough for the small call, not for the big one ahead
        await spin()
        assert got == []
        clock.advance(25)  # 300 tokens
        await spin()
        assert got == ["big"]
        clock.advance(1)
        await spin()
        assert got == ["big", "small"]
        await asyncio.gather(big, small)

    asyncio.run(main())


def test_requests_per_minute_is_enforced(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(requests_per_minute=2, key=key, clock=clock)  # one more every 30 s
        await rate.acquire(key, 0)
        await rate.acquire(key, 0)
        got: list[str] = []
        third = start(rate, key, 0, got, "third")
        await spin()
        clock.advance(29.9)
        await spin()
        assert got == []
        clock.advance(0.1)
        await spin()
        assert got == ["third"]
        await third

    asyncio.run(main())


def test_tokens_per_minute_is_enforced_with_the_estimate_charged_up_front(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(requests_per_minute=1000, tokens_per_minute=1200, key=key, clock=clock)
        await rate.acquire(key, 1000)
        got: list[str] = []
        second = start(rate, key, 500, got, "second")  # 300 missing at 20 tokens a second
        await spin()
        clock.advance(14.9)
        await spin()
        assert got == []
        clock.advance(0.1)
        await spin()
        assert got == ["second"]
        await second

    asyncio.run(main())


def test_a_call_larger_than_the_minute_waits_for_a_full_bucket_then_overdraws_it(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(tokens_per_minute=100, key=key, clock=clock)
        await rate.acquire(key, 50)
        got: list[str] = []
        huge = start(rate, key, 250, got, "huge")
        await spin()
        clock.advance(30)  # full again
        await spin()
        assert got == ["huge"]
        await huge
        after = start(rate, key, 10, got, "after")  # the 150 overdrawn plus 10: 96 s
        await spin()
        clock.advance(95)
        await spin()
        assert got == ["huge"]
        clock.advance(1)
        await spin()
        assert got == ["huge", "after"]
        await after

    asyncio.run(main())


def test_two_llmrates_with_one_key_share_one_queue(key):
    async def main() -> None:
        clock = ManualClock()
        drop_in = LLMRate(requests_per_minute=1, key=key, clock=clock)
        native = LLMRate(requests_per_minute=1, key=key, clock=clock)
        await drop_in.acquire("openai", 0)
        got: list[str] = []
        waiting = start(native, "anthropic", 0, got, "native")  # the key wins over the provider
        await spin()
        assert got == []
        clock.advance(60)
        await spin()
        assert got == ["native"]
        await waiting

    asyncio.run(main())


def test_without_a_key_each_provider_has_its_own_default_queue(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(requests_per_minute=1, clock=clock)
        await rate.acquire(f"{key}-openai", 0)
        await asyncio.wait_for(rate.acquire(f"{key}-anthropic", 0), 1)  # not held up
        other = LLMRate(requests_per_minute=1, clock=clock)
        got: list[str] = []
        waiting = start(other, f"{key}-openai", 0, got, "same provider")
        await spin()
        assert got == []
        waiting.cancel()

    asyncio.run(main())


def test_one_key_with_different_limits_is_refused(key):
    LLMRate(requests_per_minute=10, key=key)
    with pytest.raises(ValueError, match="already limited to requests_per_minute=10"):
        LLMRate(requests_per_minute=20, key=key)


def test_settle_gives_back_what_the_call_did_not_use(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(tokens_per_minute=100, key=key, clock=clock)
        async with rate.slot(key, 100) as slot:
            got: list[str] = []
            waiting = start(rate, key, 60, got, "next")
            await spin()
            assert got == []
            slot.settle(40)  # 60 unused: the next call goes at once, the clock never moved
            await spin()
            assert got == ["next"]
            await waiting

    asyncio.run(main())


def test_max_concurrent_holds_calls_until_a_slot_is_released(key):
    async def main() -> None:
        rate = LLMRate(max_concurrent=2, key=key, clock=ManualClock())
        one = await rate.acquire(key, 0)
        await rate.acquire(key, 0)
        got: list[str] = []
        third = start(rate, key, 0, got, "third")
        await spin()
        assert got == []
        one.release()
        one.release()  # idempotent: frees one place, not two
        await spin()
        assert got == ["third"]
        fourth = start(rate, key, 0, got, "fourth")
        await spin()
        assert got == ["third"]
        fourth.cancel()
        await third

    asyncio.run(main())


def test_a_cancelled_waiter_gives_up_its_place(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(requests_per_minute=1, key=key, clock=clock)
        await rate.acquire(key, 0)
        got: list[str] = []
        head = start(rate, key, 0, got, "head")  # waiting on the clock's timer
        await spin()
        behind = start(rate, key, 0, got, "behind")
        await spin()
        head.cancel()
        await spin()
        assert head.cancelled()
        clock.advance(60)  # the place goes to the next in line, on a timer of its own
        await spin()
        assert got == ["behind"]
        await behind
        assert not rate._queue(key).waiters

    asyncio.run(main())


def test_a_sync_waiter_on_a_thread_is_served_through_the_loop(key):
    async def main() -> None:
        clock = ManualClock()
        rate = LLMRate(requests_per_minute=1, key=key, clock=clock)
        loop = asyncio.get_running_loop()
        waited_on: list[int] = []

        def call_on_thread() -> int:
            with rate.blocking_slot(key, 0, loop):
                waited_on.append(threading.get_ident())
                return 1

        assert await asyncio.to_thread(call_on_thread) == 1  # uncontended: no hop
        thread_call = asyncio.ensure_future(asyncio.to_thread(call_on_thread))
        deadline = time.monotonic() + 10
        while not rate._queue(key).waiters:  # the thread's request reaching the loop's queue
            assert time.monotonic() < deadline
            await asyncio.sleep(0.001)
        waiter = rate._queue(key).waiters[0]
        assert waiter.loop is loop and not thread_call.done()
        clock.advance(60)
        assert await thread_call == 1
        assert len(waited_on) == 2 and threading.get_ident() not in waited_on

    asyncio.run(main())


def test_a_blocking_slot_on_the_loop_it_waits_through_is_refused(key):
    async def main() -> None:
        rate = LLMRate(requests_per_minute=1, key=key, clock=ManualClock())
        loop = asyncio.get_running_loop()
        rate.acquire_blocking(key, 0, loop)  # uncontended: taken without waiting
        with pytest.raises(RuntimeError, match="would block that loop"):
            rate.acquire_blocking(key, 0, loop)

    asyncio.run(main())


def test_a_sync_waiter_whose_loop_has_stopped_is_not_left_hanging(key):
    rate = LLMRate(requests_per_minute=1, key=key, clock=ManualClock())
    loop = asyncio.new_event_loop()
    try:
        rate.acquire_blocking(key, 0, loop)  # uncontended: no loop needed
        with pytest.raises(RunAttemptEnded, match="event loop has stopped"):
            rate.acquire_blocking(key, 0, loop)
    finally:
        loop.close()


def test_a_sync_call_with_no_run_bound_runs_unlimited_and_warns_once(key, caplog):
    rate = LLMRate(requests_per_minute=1, key=key, clock=ManualClock())
    with caplog.at_level(logging.WARNING, logger="pyrula.ratelimit"):
        for _ in range(3):
            with rate.blocking_slot(key, 10, None) as slot:
                slot.settle(5)
    warnings = [r for r in caplog.records if r.name == "pyrula.ratelimit"]
    assert len(warnings) == 1
    assert key in warnings[0].getMessage() and "outside a run" in warnings[0].getMessage()


def test_the_estimate_is_the_spend_caps_worst_case():
    assert estimate_tokens(400, {"max_tokens": 256, "model": "m"}) == 100 + 256
    assert estimate_tokens(401, {}) == 100


def test_limits_must_be_given_and_positive():
    with pytest.raises(ValueError, match="limits nothing"):
        LLMRate()
    with pytest.raises(ValueError, match="requests_per_minute=0"):
        LLMRate(requests_per_minute=0)


# -- in a run: the integration a drop-in makes --------------------------------------------------

UPSTREAM = chat_upstream()
SEEN: list[bool] = []
RATE = LLMRate(requests_per_minute=1000, key="test-ratelimit-run")


@agent(name="ratelimit_replays")
async def limited(ctx: AgentContext) -> str:
    assert current_run().in_run
    client = async_openai(UPSTREAM)
    frame = CallFrame()
    with in_call(frame):
        replayed = replays(frame)
        SEEN.append(replayed)
        if replayed:
            reply = await ask(client, "one")
        else:
            async with RATE.slot("openai", 50) as slot:
                reply = await ask(client, "one")
                slot.settle(11)
    await ctx.interrupt("again?")
    return reply


def test_a_call_claims_its_position_and_a_replayed_one_takes_no_slot():
    from pyrula.runtime import answer

    UPSTREAM.calls.clear()
    SEEN.clear()
    store = new_store()
    handle = run_to_rest(limited, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    assert asyncio.run(handle.result()) == "answer to one"
    assert SEEN == [False, True] and len(UPSTREAM.calls) == 1
    positions = [e.payload["position"] for e in handle.events() if e.type == "llm:done"]
    assert positions == ["main/llm0"]


THREAD_RATE = LLMRate(requests_per_minute=1000, key="test-ratelimit-thread")


@agent(name="ratelimit_thread")
async def limited_on_thread(ctx: AgentContext) -> str:
    run = current_run()
    assert run.in_run and run.loop is asyncio.get_running_loop()
    client = sync_openai(UPSTREAM)

    def call() -> str:
        run = current_run()
        assert run.in_run
        with THREAD_RATE.blocking_slot("openai", 50, run.loop):
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "thread"}]
            )
        return reply.choices[0].message.content or ""

    return await ctx.to_thread(call)


def test_a_sync_call_on_a_thread_of_the_run_finds_the_runs_loop():
    UPSTREAM.calls.clear()
    handle = run_to_rest(limited_on_thread)
    assert asyncio.run(handle.result()) == "answer to thread"
