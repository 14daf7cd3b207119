"""OpenAI Responses (`POST .../responses`), on OpenAI or an OpenAI-compatible provider
(`openai_compatible`), whose name is kept in `meta["provider"]`."""

from __future__ import annotations

from typing import Any

from . import openai_compatible, surfaces
from ._canonical import Canonical, RequestParts, json_object, pick, rest, strip_binary
from ._url import split_url

SURFACE = surfaces.OPENAI_RESPONSES

# Top-level fields compared whole. `text` and `prompt` are compared in part, below.
COMPARED = ("input", "instructions", "tools", "tool_choice", "previous_response_id")
# Of `text`, only the output format decides the reply's shape (`verbosity` is sampling).
TEXT_COMPARED = ("format",)
# A stored prompt is identified by these; anything else in it is left to meta.
PROMPT_COMPARED = ("id", "version", "variables")

# A prompt-only call (stored prompt, or a continuation) may carry no `input`.
_REQUIRED_ANY = ("input", "prompt", "previous_response_id", "instructions")
_TAKEN = frozenset((*COMPARED, "stream", "text", "prompt"))


def canonicalize(parts: RequestParts) -> Canonical:
    body = json_object(parts.json(), _REQUIRED_ANY)
    stream = body.get("stream") is True
    compared = pick(body, COMPARED)
    meta: dict[str, Any] = rest(body, _TAKEN)
    _split(body.get("text"), TEXT_COMPARED, "text", compared, meta)
    _split(body.get("prompt"), PROMPT_COMPARED, "prompt", compared, meta)
    compared["stream"] = stream
    url = split_url(parts.url)
    if url.query:
        meta["query"] = dict(url.query)
    if provider := openai_compatible.provider_of(parts.url):
        meta["provider"] = provider
    return Canonical.build(SURFACE, compared, meta, stream=stream)


def _split(
    value: Any,
    names: tuple[str, ...],
    field: str,
    compared: dict[str, Any],
    meta: dict[str, Any],
) -> None:
    """Put the `names` of one nested object in `compared` and the rest of it in `meta`."""
    if value is None:
        return
    if not isinstance(value, dict):
        compared[field] = strip_binary(value)  # malformed: compare it whole rather than drop it
        return
    if kept := pick(value, names):
        compared[field] = kept
    if others := rest(value, frozenset(names)):
        meta[field] = others
