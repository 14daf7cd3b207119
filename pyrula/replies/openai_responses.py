"""OpenAI Responses replies.

A stream is `event: <type>` / `data: {...}` pairs with no `[DONE]`: it ends at
`response.completed`, `response.incomplete`, `response.failed` or `error`. Every lifecycle event
carries the whole response object, usage included once it is known.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyrula.fingerprints import surfaces

from ._json import mapping, number
from .rules import ReplyRules, SSEFrame, Usage, event_type, generated_bytes, stateless

TERMINALS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


def finished(frame: SSEFrame) -> bool:
    return event_type(frame) in TERMINALS


def usage(documents: Iterable[Any]) -> Usage:
    """Usage of the last response object seen; a failure it reports is kept as `error`."""
    model: str | None = None
    error: str | None = None
    inp = out = cache_read = 0
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        if doc.get("type") == "error":
            error = "error"
        response = doc.get("response") if "response" in doc else doc
        if not isinstance(response, dict):
            continue
        # Every lifecycle event carries the response: a failed one may have no usage.
        model = response.get("model") or model
        if response.get("status") == "failed":
            error = "response.failed"
        if response.get("usage"):
            counts = mapping(response["usage"])
            cached = number(mapping(counts.get("input_tokens_details")).get("cached_tokens"))
            inp, cache_read = number(counts.get("input_tokens")) - cached, cached
            out = number(counts.get("output_tokens"))
    return Usage(model, inp, out, cache_read, 0, error)


def text(event: str, data: dict[str, Any]) -> Iterator[tuple[int, str]]:
    kind = data.get("type") or event
    if kind == "response.output_text.delta" and isinstance(data.get("delta"), str):
        yield 0, data["delta"]


def _repeats_whole(document: Any) -> bool:
    """`*.done` events repeat a finished part whole: its deltas were already counted."""
    return isinstance(document, dict) and str(document.get("type", "")).endswith(".done")


RULES = ReplyRules(
    surface=surfaces.OPENAI_RESPONSES,
    usage=usage,
    # Deltas of text, tool arguments and custom tool input; parts as they are added.
    arrived=generated_bytes(
        frozenset({"delta", "text", "arguments", "input"}), skip=_repeats_whole
    ),
    sse_end=stateless(finished),
    text=text,
)
