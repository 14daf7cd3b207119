"""Client-side rate limits for model calls: `LLMRate`, one fair queue per key in the process.

Every client given an `LLMRate` with the same key (the provider's default key when it names
none) waits in one queue, so a drop-in and a native client of one provider share their limits.
A live call takes one slot (a replayed call takes none) and is charged its estimate up front;
a non-streamed call then settles the slot with its real usage, which gives back what it did not
use. Limits are token buckets holding a minute's allowance and refilling continuously, as the
providers' own limits do; waiters are served strictly first come, first served.

Waiting is asyncio: a waiter sleeps on a future and the head of the queue on one timer, so
nothing polls. A sync call on a thread of a run waits through the run's loop
(`blocking_slot(..., loop)`); an uncontended one takes its slot without the hop. The queue's
state sits behind a thread lock, since those threads and the loop both touch it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Protocol

from pyrula.errors import RunAttemptEnded
from pyrula.runtime.limits import estimate_tokens

__all__ = [
    "ANTHROPIC",
    "BEDROCK",
    "GEMINI",
    "OPENAI",
    "Clock",
    "LLMRate",
    "Slot",
    "estimate_tokens",
]

log = logging.getLogger("pyrula.ratelimit")

# Each provider's default key: the queue its drop-in and its native client share when their
# LLMRate names no key of its own.
OPENAI: Final = "openai"
ANTHROPIC: Final = "anthropic"
GEMINI: Final = "gemini"
BEDROCK: Final = "bedrock"

_MINUTE = 60.0
# Float slack when a timer wakes the head exactly when its tokens are due.
_EPSILON = 1e-9


class Timer(Protocol):
    def cancel(self) -> object: ...


class Clock(Protocol):
    """The limiter's time: seconds that only go forward, and a timer whose callback runs on
    `loop`'s thread. Tests pass a clock they advance by hand, so nothing sleeps."""

    def now(self) -> float: ...

    def call_later(
        self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], None]
    ) -> Timer: ...


class _Monotonic:
    def now(self) -> float:
        return time.monotonic()

    def call_later(
        self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], None]
    ) -> Timer:
        return loop.call_later(delay, callback)


_MONOTONIC: Final = _Monotonic()


@dataclass(frozen=True, slots=True)
class _Limits:
    requests_per_minute: float | None
    tokens_per_minute: float | None
    max_concurrent: int | None


class _Bucket:
    """A token bucket holding up to a minute's allowance, refilled continuously."""

    __slots__ = ("capacity", "level", "rate", "updated")

    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = per_minute
        self.level = per_minute
        self.rate = per_minute / _MINUTE
        self.updated = now

    def wait(self, amount: float, now: float) -> float:
        """Seconds until `amount` can be taken (0: now). An amount larger than the bucket waits
        for a full bucket and overdraws it, rather than waiting forever."""
        if now > self.updated:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now
        missing = min(amount, self.capacity) - self.level
        return missing / self.rate if missing > _EPSILON else 0.0

    def add(self, amount: float) -> None:
        # Negative when a call took more than its estimate: the debt delays the next call.
        self.level = min(self.capacity, self.level + amount)


class _Waiter:
    __slots__ = ("cost", "loop", "wake")

    def __init__(self, cost: int, loop: asyncio.AbstractEventLoop) -> None:
        self.cost = cost
        self.loop = loop
        self.wake: asyncio.Future[None] = loop.create_future()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Queue:
    """One key's limits and waiters, shared by every LLMRate with that key."""

    def __init__(self, key: str, limits: _Limits, clock: Clock) -> None:
        self.key = key
        self.limits = limits
        self.clock = clock
        now = clock.now()
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        self.requests = _Bucket(rpm, now) if rpm is not None else None
        self.tokens = _Bucket(tpm, now) if tpm is not None else None
        self.in_flight = 0
        self.waiters: deque[_Waiter] = deque()
        self.lock = threading.Lock()

    # Everything below named with a leading underscore runs with `lock` held.

    def _delay(self, cost: int) -> float | None:
        """Seconds until a call charged `cost` tokens may start; None: once a slot is released."""
        limit = self.limits.max_concurrent
        if limit is not None and self.in_flight >= limit:
            return None
        now = self.clock.now()
        delay = self.requests.wait(1, now) if self.requests is not None else 0.0
        if self.tokens is not None:
            delay = max(delay, self.tokens.wait(cost, now))
        return delay

    def _grant(self, cost: int) -> Slot:
        self.in_flight += 1
        if self.requests is not None:
            self.requests.level -= 1
        if self.tokens is not None:
            self.tokens.level -= cost
        return Slot(self, cost)

    def _wake_head(self) -> None:
        """Let the first waiter look again: the queue or the limits changed."""
        while self.waiters:
            head = self.waiters[0]
            try:
                head.loop.call_soon_threadsafe(_resolve, head.wake)
                return
            except RuntimeError:  # its loop is closed: it will never take its turn
                self.waiters.popleft()

    def try_now(self, cost: int) -> Slot | None:
        """A slot at once if nobody is waiting and the limits allow it, else None."""
        with self.lock:
            if not self.waiters and self._delay(cost) == 0.0:
                return self._grant(cost)
        return None

    async def acquire(self, cost: int) -> Slot:
        with self.lock:
            if not self.waiters and self._delay(cost) == 0.0:
                return self._grant(cost)
            loop = asyncio.get_running_loop()
            waiter = _Waiter(cost, loop)
            self.waiters.append(waiter)
        try:
            while True:
                delay: float | None = None
                timer: Timer | None = None
                with self.lock:
                    if self.waiters[0] is waiter:
                        delay = self._delay(cost)
                        if delay == 0.0:
                            self.waiters.popleft()
                            self._wake_head()  # the next waiter now sets its own timer
                            return self._grant(cost)
                    # A fresh future under the lock: a wake from now on reaches it, and one that
                    # came before was seen by the check above.
                    waiter.wake = wake = loop.create_future()
                    if delay is not None:  # only the head waits on the clock
                        wake_up = functools.partial(_resolve, wake)
                        timer = self.clock.call_later(loop, delay, wake_up)
                try:
                    await wake
                finally:
                    if timer is not None:
                        timer.cancel()
        except BaseException:
            # Cancelled (or its loop torn down) while waiting: give up the place in the queue.
            with self.lock:
                was_head = bool(self.waiters) and self.waiters[0] is waiter
                if waiter in self.waiters:
                    self.waiters.remove(waiter)
                if was_head:
                    self._wake_head()
            raise

    def release(self) -> None:
        with self.lock:
            self.in_flight -= 1
            self._wake_head()

    def refund(self, tokens: int) -> None:
        if self.tokens is None:
            return
        with self.lock:
            self.tokens.add(tokens)
            if tokens > 0:
                self._wake_head()


class Slot:
    """One live model call's place under a rate limit.

    `release()` ends the call's hold on `max_concurrent` (the context managers do it on exit);
    `settle(actual_tokens)` reports what the call really used, giving back the rest of its
    estimate. An unsettled slot keeps its whole estimate charged: a streamed call, or one that
    failed before a reply said what it used.
    """

    __slots__ = ("_queue", "_released", "_settled", "estimate")

    def __init__(self, queue: _Queue | None, estimate: int) -> None:
        self._queue = queue  # None: an unlimited slot
        self.estimate = estimate
        self._released = False
        self._settled = False

    def settle(self, actual_tokens: int) -> None:
        """Charge the call `actual_tokens` instead of its estimate (once; later calls are
        ignored). A call that used more than its estimate leaves the difference as a debt the
        next calls wait out."""
        if self._settled:
            return
        self._settled = True
        if self._queue is not None:
            self._queue.refund(self.estimate - actual_tokens)

    def release(self) -> None:
        """End the call's hold on the concurrency limit (idempotent)."""
        if self._released:
            return
        self._released = True
        if self._queue is not None:
            self._queue.release()


_queues: dict[str, _Queue] = {}
_queues_lock = threading.Lock()
_warned_unbound: set[str] = set()


def _queue_for(key: str, limits: _Limits, clock: Clock) -> _Queue:
    with _queues_lock:
        queue = _queues.get(key)
        if queue is None:
            queue = _queues[key] = _Queue(key, limits, clock)
        elif queue.limits != limits or queue.clock is not clock:
            had = queue.limits
            raise ValueError(
                f"rate-limit key {key!r} is already limited to requests_per_minute="
                f"{had.requests_per_minute}, tokens_per_minute={had.tokens_per_minute}, "
                f"max_concurrent={had.max_concurrent} in this process; give this LLMRate the "
                "same limits (and clock) to share that queue, or its own key= to have a queue "
                "of its own"
            )
        return queue


class LLMRate:
    """Client-side limits on live model calls, shared by every client with the same key.

    `LLMRate(requests_per_minute=500, tokens_per_minute=200_000)`: each limit is a bucket that
    holds a minute's allowance (a full minute's worth may go at once) and refills continuously.
    `max_concurrent` caps the calls in flight. `key` names the queue; without one each
    provider's clients share that provider's default key (`"openai"`, `"anthropic"`, ...).
    Two LLMRates with one key must carry the same limits.
    """

    __slots__ = ("_clock", "_limits", "_queues", "key")

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        max_concurrent: int | None = None,
        key: str | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        for name, value in (
            ("requests_per_minute", requests_per_minute),
            ("tokens_per_minute", tokens_per_minute),
            ("max_concurrent", max_concurrent),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"LLMRate({name}={value!r}): give a positive number, or None")
        if requests_per_minute is None and tokens_per_minute is None and max_concurrent is None:
            raise ValueError(
                "LLMRate() with no limit limits nothing; give requests_per_minute, "
                "tokens_per_minute or max_concurrent"
            )
        self.key = key
        self._limits = _Limits(requests_per_minute, tokens_per_minute, max_concurrent)
        self._clock: Clock = clock or _MONOTONIC
        self._queues: dict[str, _Queue] = {}
        if key is not None:
            self._queue(key)  # a clash with another LLMRate of this key shows at construction

    def __repr__(self) -> str:
        limits = self._limits
        return (
            f"LLMRate(requests_per_minute={limits.requests_per_minute}, "
            f"tokens_per_minute={limits.tokens_per_minute}, "
            f"max_concurrent={limits.max_concurrent}, key={self.key!r})"
        )

    def _queue(self, provider_key: str) -> _Queue:
        key = self.key or provider_key
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _queue_for(key, self._limits, self._clock)
        return queue

    async def acquire(self, provider_key: str, estimate_tokens: int) -> Slot:
        """Wait for a slot for one live call (FIFO) and charge it `estimate_tokens`. The caller
        must `release()` it; prefer `async with rate.slot(...)`."""
        return await self._queue(provider_key).acquire(estimate_tokens)

    def acquire_blocking(
        self, provider_key: str, estimate_tokens: int, loop: asyncio.AbstractEventLoop | None
    ) -> Slot:
        """`acquire` for a sync call on a thread: it waits through `loop`, the run's loop. With no
        loop (no run bound) the call runs unlimited, and a warning is logged once per key."""
        queue = self._queue(provider_key)
        if loop is None:
            if queue.key not in _warned_unbound:
                _warned_unbound.add(queue.key)
                log.warning(
                    "a sync model call with rate_limit=%r ran outside a run, so it was not "
                    "limited (rate-limit key %r); make it on a thread of a run "
                    "(`await ctx.to_thread(fn)`), or use the async client",
                    self,
                    queue.key,
                )
            return Slot(None, estimate_tokens)
        slot = queue.try_now(estimate_tokens)
        if slot is not None:
            return slot
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError(
                "acquire_blocking() was called on the loop it waits through, which would block "
                "that loop forever; call it on a thread (`await ctx.to_thread(fn)`), or use "
                "`async with rate.slot(...)`"
            )
        if not loop.is_running():
            # Nothing would ever serve the wait: the run's attempt is over.
            raise RunAttemptEnded(
                "the run's event loop has stopped, so this thread's model call cannot wait for "
                "a rate-limit slot; the call was not sent"
            )
        return asyncio.run_coroutine_threadsafe(queue.acquire(estimate_tokens), loop).result()

    def slot(self, provider_key: str, estimate_tokens: int) -> _AsyncSlot:
        """`async with rate.slot("openai", estimate) as slot:` around one live call; the slot is
        released on exit. Call `slot.settle(actual_tokens)` once the reply says what it used."""
        return _AsyncSlot(self, provider_key, estimate_tokens)

    def blocking_slot(
        self, provider_key: str, estimate_tokens: int, loop: asyncio.AbstractEventLoop | None
    ) -> _BlockingSlot:
        """`with rate.blocking_slot("openai", estimate, attempt.loop) as slot:`, the sync twin of
        `slot` for a thread of the run (see `acquire_blocking`)."""
        return _BlockingSlot(self, provider_key, estimate_tokens, loop)


class _AsyncSlot:
    __slots__ = ("_args", "_rate", "_slot")

    def __init__(self, rate: LLMRate, provider_key: str, estimate_tokens: int) -> None:
        self._rate = rate
        self._args = (provider_key, estimate_tokens)
        self._slot: Slot | None = None

    async def __aenter__(self) -> Slot:
        provider_key, estimate_tokens = self._args
        self._slot = await self._rate._queue(provider_key).acquire(estimate_tokens)
        return self._slot

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._slot is not None:
            self._slot.release()


class _BlockingSlot:
    __slots__ = ("_args", "_loop", "_rate", "_slot")

    def __init__(
        self,
        rate: LLMRate,
        provider_key: str,
        estimate_tokens: int,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        self._rate = rate
        self._args = (provider_key, estimate_tokens)
        self._loop = loop
        self._slot: Slot | None = None

    def __enter__(self) -> Slot:
        self._slot = self._rate.acquire_blocking(*self._args, self._loop)
        return self._slot

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._slot is not None:
            self._slot.release()
