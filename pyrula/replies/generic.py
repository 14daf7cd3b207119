"""Replies to requests no provider route claims: read as leniently as the request was.

No stream end is known, so a stream is whole when its connection ends. Usage is read in either
shape that reaches here: OpenAI chat's (a Bedrock-hosted OpenAI model's `invoke`, an unknown
gateway) or Bedrock Converse's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyrula.fingerprints import surfaces

from . import bedrock_converse, openai_chat
from .rules import ReplyRules, Usage, generated_bytes

# Every provider's places for generated text and tool arguments.
GENERATED = frozenset({"content", "arguments", "delta", "text", "partial_json", "args", "input"})


def usage(documents: Iterable[Any]) -> Usage:
    """Each document by its own shape: Bedrock's `inputTokens`, else OpenAI chat's counts."""
    model: str | None = None
    inp = out = cache_read = cache_write = 0
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        model = doc.get("model") or model
        counts = doc.get("usage")
        if not counts or not isinstance(counts, dict):
            continue
        if "inputTokens" in counts:
            found = bedrock_converse.usage([doc])
            cache_write = found.cache_write_tokens
        else:
            found = openai_chat.usage([doc])
        inp, out, cache_read = found.input_tokens, found.output_tokens, found.cache_read_tokens
    return Usage(model, inp, out, cache_read, cache_write)


def _repeats_whole(document: Any) -> bool:
    return isinstance(document, dict) and str(document.get("type", "")).endswith(".done")


RULES = ReplyRules(
    surface=surfaces.GENERIC,
    usage=usage,
    arrived=generated_bytes(GENERATED, skip=_repeats_whole),
    model_fields=("model", "modelVersion"),
)
