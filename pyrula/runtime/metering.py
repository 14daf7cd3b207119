"""What a model call cost: usage read from the recorded reply, priced from a packaged table
(`pricing`, whose names are re-exported here)."""

from __future__ import annotations

from pyrula.replies import Usage, rules_for
from pyrula.replies.rules import BYTES_PER_TOKEN
from pyrula.runtime.pricing import PriceTable, canonical_model, deployment, prices, requested_model
from pyrula.transport.framing import reply_documents

__all__ = [
    "PriceTable",
    "Usage",
    "arrived_output_tokens",
    "canonical_model",
    "deployment",
    "prices",
    "requested_model",
    "usage_from_reply",
]


def usage_from_reply(surface: str, body: bytes, streamed: bool) -> Usage:
    """Read token usage the way the surface's provider reports it (a stream: its cumulative
    counts), by its rules in `pyrula.replies`."""
    return rules_for(surface).usage(reply_documents(body, streamed))


def arrived_output_tokens(surface: str, body: bytes, streamed: bool) -> int:
    """Output a stream cut short had already sent, text and tool arguments alike, at four bytes
    a token: an estimate for when its own usage never arrived."""
    return rules_for(surface).arrived(reply_documents(body, streamed)) // BYTES_PER_TOKEN
