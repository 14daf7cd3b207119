"""Call framing: one SDK-level call takes one journal position, whatever its retries, and its
outcome (errors included) is what is journaled there and raised again on replay."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol, TypeVar

from pyrula.agents.compat._rate_slots import RateCall, blocking_rate_slot, rate_slot
from pyrula.errors import RecordRefused
from pyrula.runtime.calls import CallFrame, ReplayedFailure, current_attempt, current_call

T = TypeVar("T")


class Outcomes(Protocol):
    """How one SDK reports a call's outcome: what a journaled failure replays as, and which
    exceptions mean the request had left (so the failure is the call's outcome)."""

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException: ...

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None: ...


@contextlib.contextmanager
def call_frame(outcomes: Outcomes, frame: CallFrame | None = None) -> Iterator[CallFrame]:
    """One journaled SDK call: its retries share a position, and an error it ends in is
    journaled, then raised again on replay without sending anything. Pass `frame` to enter the
    same call again (a stream whose requests go out as it is iterated)."""
    frame = frame if frame is not None else CallFrame()
    token = current_call.set(frame)
    try:
        yield frame
    except ReplayedFailure as replayed:
        raise outcomes.rebuilt(replayed) from None
    except RecordRefused as refused:
        raise refused.error from None
    except BaseException as exc:
        # The SDK gave up: journal a provider error, or a transport failure after the request
        # went out; a failure before sending (a rejected argument, no connection) is not.
        attempt = current_attempt.get()
        if attempt is not None:
            attempt.session.end_call(frame, outcomes.sent_failure(exc))
        raise
    finally:
        current_call.reset(token)


def framed(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    outcomes: Outcomes,
    *,
    manager: bool = False,
    blocking: bool = False,
    rate: RateCall | None = None,
) -> Any:
    """Call `fn` as one journaled call: `manager` when it returns a stream manager whose request
    goes out on entering it, `blocking` for a sync client (its request goes out inside `fn`)."""
    if blocking and not manager:
        with call_frame(outcomes) as frame, blocking_rate_slot(rate, frame) as slot:
            result = fn(*args, **kwargs)
            if rate is not None:
                rate.settle(slot, result)
            return result
    with call_frame(outcomes):
        result = fn(*args, **kwargs)
    if inspect.iscoroutine(result):
        return _framed_async(result, outcomes, rate)
    if manager:
        return _FramedStreamManager(result, outcomes, rate)
    return result


async def _framed_async(awaitable: Awaitable[T], outcomes: Outcomes, rate: RateCall | None) -> T:
    with call_frame(outcomes) as frame:
        async with rate_slot(rate, frame) as slot:
            result = await awaitable
            if rate is not None:
                rate.settle(slot, result)
            return result


class _FramedStreamManager:
    """A `stream(...)` helper's manager, whose request (sent on entering it) is one call."""

    __slots__ = ("_pyrula_manager", "_pyrula_outcomes", "_pyrula_rate")

    def __init__(self, manager: Any, outcomes: Outcomes, rate: RateCall | None) -> None:
        self._pyrula_manager = manager
        self._pyrula_outcomes = outcomes
        self._pyrula_rate = rate

    def __enter__(self) -> Any:
        outcomes, rate = self._pyrula_outcomes, self._pyrula_rate
        with call_frame(outcomes) as frame, blocking_rate_slot(rate, frame):
            return self._pyrula_manager.__enter__()

    def __exit__(self, *exc_info: Any) -> Any:
        return self._pyrula_manager.__exit__(*exc_info)

    async def __aenter__(self) -> Any:
        with call_frame(self._pyrula_outcomes) as frame:
            async with rate_slot(self._pyrula_rate, frame):
                return await self._pyrula_manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._pyrula_manager.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pyrula_manager, name)
