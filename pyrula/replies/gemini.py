"""Gemini `generateContent` / `streamGenerateContent` replies (Gemini API and Vertex AI).

A stream is `data: {...}` chunks with no end marker: it is whole when its last chunk's candidates
all carry a `finishReason`; that chunk also holds the final `usageMetadata`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyrula.fingerprints import surfaces

from ._json import dicts, index, mapping, number, parse_json
from .rules import ReplyRules, SSEFrame, Usage, generated_bytes, stateless


def finished(frame: SSEFrame) -> bool:
    """Whether this chunk ends the stream: it has candidates, and every one has finished."""
    data = parse_json(frame.data)
    candidates = data.get("candidates") if isinstance(data, dict) else None
    if not isinstance(candidates, list) or not candidates:
        return False
    return all(isinstance(c, dict) and c.get("finishReason") for c in candidates)


def usage(documents: Iterable[Any]) -> Usage:
    """Cached prompt tokens count as cache reads; thoughts are billed as output."""
    model: str | None = None
    inp = out = cache_read = 0
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        model = doc.get("modelVersion") or model
        meta = mapping(doc.get("usageMetadata"))
        if meta:
            cached = number(meta.get("cachedContentTokenCount"))
            prompt = number(meta.get("promptTokenCount")) + number(
                meta.get("toolUsePromptTokenCount")
            )
            inp, cache_read = prompt - cached, cached
            out = number(meta.get("candidatesTokenCount")) + number(meta.get("thoughtsTokenCount"))
    return Usage(model, inp, out, cache_read)


def text(event: str, data: dict[str, Any]) -> Iterator[tuple[int, str]]:
    """Each candidate's text parts, thoughts left out."""
    for candidate in dicts(data.get("candidates")):
        for part in dicts(mapping(candidate.get("content")).get("parts")):
            piece = part.get("text")
            if isinstance(piece, str) and not part.get("thought"):
                yield index(candidate.get("index")), piece


RULES = ReplyRules(
    surface=surfaces.GEMINI_GENERATE,
    usage=usage,
    # Text parts, and function-call `args` (a JSON object, counted serialised).
    arrived=generated_bytes(frozenset({"text", "args"})),
    sse_end=stateless(finished),
    text=text,
    model_fields=("modelVersion",),
)
