"""What one recorded reply used and cost, by the same rules the runtime meters a call with."""

from __future__ import annotations

from typing import Any

from pyrula.replies import Usage
from pyrula.runtime.metering import prices, usage_from_reply


def usage_and_cost(
    surface: str, body: bytes, streamed: bool, meta: dict[str, Any]
) -> tuple[Usage, float | None]:
    """The tokens the reply reports and their price (None when no price is known)."""
    usage = usage_from_reply(surface, body, streamed)
    return usage, prices.cost(usage, usage.model or meta.get("model"))
