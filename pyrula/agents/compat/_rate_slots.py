"""Rate-limit slots: a call sent live waits for a `rate_limit=` slot; a replayed one takes none."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyrula.runtime.calls import (
    CallFrame,
    LLMRate,
    Slot,
    areplays,
    billable_request_bytes,
    current_run,
    estimate_tokens,
    replays,
)


@dataclass(frozen=True, slots=True)
class RateCall:
    """A call that takes a `rate_limit=` slot when it is sent live (a replay takes none)."""

    rate: LLMRate
    key: str  # the provider's queue, unless the LLMRate names its own
    estimate: int
    streamed: bool  # a stream is charged its estimate: its usage is not reported back

    @staticmethod
    def of(
        client: Any,
        key: str,
        kwargs: dict[str, Any],
        streamed: bool,
        meta: Mapping[str, Any] | None = None,
    ) -> RateCall | None:
        """`meta` names the call's model as a request's `Canonical.meta` does (for the bounds
        its images are counted at); without it the arguments' own `model` is read."""
        rate: LLMRate | None = getattr(client, "_pyrula_rate", None)
        if rate is None:
            return None
        body = json.dumps(kwargs, default=str).encode()
        size = billable_request_bytes(body, f"{key}.", meta)
        return RateCall(rate, key, estimate_tokens(size, kwargs), streamed)

    def settle(self, slot: Slot | None, result: Any) -> None:
        if slot is not None and not self.streamed:
            if isinstance(result, dict):  # boto3
                usage = result.get("usage")
            else:  # google-genai keeps it as `usage_metadata`
                usage = getattr(result, "usage", None) or getattr(result, "usage_metadata", None)
            used = _total_tokens(usage)
            if used is not None:
                slot.settle(used)


def _total_tokens(usage: Any) -> int | None:
    if isinstance(usage, dict):  # Bedrock converse
        total = usage.get("totalTokens")
        return total if isinstance(total, int) else None
    total = getattr(usage, "total_tokens", getattr(usage, "total_token_count", None))
    if isinstance(total, int):
        return total
    counts = [
        getattr(usage, name, None)
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    ]
    found = [c for c in counts if isinstance(c, int)]
    return sum(found) if found else None


@contextlib.contextmanager
def blocking_rate_slot(rate: RateCall | None, frame: CallFrame) -> Iterator[Slot | None]:
    if rate is None or replays(frame):
        yield None
        return
    # Waits through the run's loop; with no run bound it runs unlimited (and warns once).
    with rate.rate.blocking_slot(rate.key, rate.estimate, current_run().loop) as slot:
        yield slot


@contextlib.asynccontextmanager
async def rate_slot(rate: RateCall | None, frame: CallFrame) -> AsyncIterator[Slot | None]:
    if rate is None or await areplays(frame):
        yield None
        return
    async with rate.rate.slot(rate.key, rate.estimate) as slot:
        yield slot
