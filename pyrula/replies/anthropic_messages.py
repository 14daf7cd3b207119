"""Anthropic Messages replies, from the direct API, Vertex, and Bedrock's `invoke`.

A stream is `event:`/`data:` pairs: `message_start` (the model, input usage), `content_block_*`,
`ping`, `message_delta` (stop reason, cumulative output usage), `message_stop`. On Bedrock the
same events come one per AWS event-stream chunk (`bedrock_converse.chunk_document`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyrula.fingerprints import surfaces

from . import bedrock_converse
from ._json import mapping, number
from .rules import AWSFrame, ReplyRules, SSEFrame, Usage, event_type, generated_bytes, stateless

TERMINALS = frozenset({"message_stop", "error"})


def finished(frame: SSEFrame) -> bool:
    return event_type(frame) in TERMINALS


def finished_on_bedrock(frame: AWSFrame) -> bool:
    """Anthropic's own events, one per Bedrock chunk; the reply is whole at `message_stop`."""
    if bedrock_converse.is_error(frame):
        return True
    event = bedrock_converse.chunk_document(frame)
    return isinstance(event, dict) and event.get("type") in TERMINALS


def usage(documents: Iterable[Any]) -> Usage:
    """Input and cache counts from `message_start` (or the message), output as last reported."""
    model: str | None = None
    inp = out = cache_read = cache_write = 0
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        message = doc.get("message") if doc.get("type") == "message_start" else doc
        if isinstance(message, dict):
            model = message.get("model") or model
            counts = mapping(message.get("usage"))
            inp = number(counts.get("input_tokens")) or inp
            cache_read = number(counts.get("cache_read_input_tokens")) or cache_read
            cache_write = number(counts.get("cache_creation_input_tokens")) or cache_write
            out = number(counts.get("output_tokens")) or out
        if doc.get("type") == "message_delta":
            out = number(mapping(doc.get("usage")).get("output_tokens")) or out
    return Usage(model, inp, out, cache_read, cache_write)


def text(event: str, data: dict[str, Any]) -> Iterator[tuple[int, str]]:
    """Text deltas only: thinking and tool-input JSON are not the reply's text."""
    kind = data.get("type") or event
    delta = mapping(data.get("delta"))
    if kind == "content_block_delta" and delta.get("type") == "text_delta":
        piece = delta.get("text")
        if isinstance(piece, str):
            yield 0, piece


def _rules(surface: str) -> ReplyRules:
    return ReplyRules(
        surface=surface,
        usage=usage,
        arrived=generated_bytes(frozenset({"text", "partial_json"})),
        sse_end=stateless(finished),
        eventstream_end=stateless(finished_on_bedrock),
        text=text,
    )


RULES = _rules(surfaces.ANTHROPIC_MESSAGES)
BETA_RULES = _rules(surfaces.ANTHROPIC_BETA_MESSAGES)
