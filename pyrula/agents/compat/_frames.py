"""Framing one SDK-level call: `framed()` runs it in a `call_frame` (one journal position, whatever
its retries; its outcome, errors included, journaled there and raised again on replay) and, when
it is sent live, in its `rate_limit=` slot. A stream manager's request is framed as it is entered.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pyrula.agents.compat._rate_slots import RateCall, blocking_rate_slot, rate_slot
from pyrula.runtime.calls import Outcomes, acall_frame, call_frame

T = TypeVar("T")


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
    async with acall_frame(outcomes) as frame, rate_slot(rate, frame) as slot:
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
        async with acall_frame(self._pyrula_outcomes) as frame, rate_slot(self._pyrula_rate, frame):
            return await self._pyrula_manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._pyrula_manager.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pyrula_manager, name)
