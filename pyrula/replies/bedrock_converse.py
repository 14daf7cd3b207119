"""Amazon Bedrock replies: Converse / ConverseStream, and the AWS event-stream wrapping that
Bedrock's `invoke-with-response-stream` puts around another vendor's own events.

ConverseStream sends `messageStart`, `contentBlockDelta`, `contentBlockStop`, `messageStop`, then
`metadata` (usage, metrics) last. An invoke stream sends `chunk` events whose payload is
`{"bytes": "<base64 of the model's own event JSON>"}` (Anthropic's events, for Claude).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from pyrula.fingerprints import surfaces

from ._json import mapping, number, parse_json
from .rules import AWSFrame, ReplyRules, Usage, generated_bytes, stateless

# Bedrock repeats the model's usage in its own key on the last chunk: read both and the call
# would count twice.
INVOCATION_METRICS = "amazon-bedrock-invocationMetrics"


def is_error(frame: AWSFrame) -> bool:
    """A modelled service error (throttlingException, ...) or an unmodelled one: the stream ends."""
    return frame.message_type in ("exception", "error")


def finished(frame: AWSFrame) -> bool:
    """ConverseStream is whole at its last event, `metadata` (or at an error)."""
    return is_error(frame) or frame.event_type == "metadata"


def chunk_document(frame: AWSFrame) -> Any:
    """The model's own event JSON inside an invoke stream's `chunk`; None when it is not one."""
    if frame.message_type != "event" or frame.event_type != "chunk":
        return None
    wrapper = parse_json(frame.payload)
    data = wrapper.get("bytes") if isinstance(wrapper, dict) else None
    if not isinstance(data, str):
        return None
    try:
        return parse_json(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def document(frame: AWSFrame) -> Any:
    """The JSON one event carries, a chunk unwrapped, Bedrock's invocation metrics left out."""
    chunk = chunk_document(frame)
    found = chunk if chunk is not None else parse_json(frame.payload)
    if isinstance(found, dict) and INVOCATION_METRICS in found:
        return {k: v for k, v in found.items() if k != INVOCATION_METRICS}
    return found


def usage(documents: Iterable[Any]) -> Usage:
    """Converse's `usage` (a reply's, or the stream's `metadata` event's)."""
    model: str | None = None
    inp = out = cache_read = cache_write = 0
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        model = doc.get("model") or model
        counts = mapping(doc.get("usage"))
        if "inputTokens" in counts:
            inp, out = number(counts.get("inputTokens")), number(counts.get("outputTokens"))
            cache_read = number(counts.get("cacheReadInputTokens"))
            cache_write = number(counts.get("cacheWriteInputTokens"))
    return Usage(model, inp, out, cache_read, cache_write)


RULES = ReplyRules(
    surface=surfaces.BEDROCK_CONVERSE,
    usage=usage,
    # `contentBlockDelta`'s text, reasoning text and tool-use input.
    arrived=generated_bytes(frozenset({"text", "input"})),
    eventstream_end=stateless(finished),
)
