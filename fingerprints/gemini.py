"""Gemini `generateContent` / `streamGenerateContent` (Gemini API and Vertex AI)."""

from __future__ import annotations

from typing import Any

from . import surfaces
from ._canonical import Canonical, RequestParts, json_object, rest, strip_binary
from ._url import split_url

SURFACE = surfaces.GEMINI_GENERATE

# Wire name -> compared name. The REST API reads both spellings; comparing under one name keeps
# a client that sends snake_case on the same fingerprint as one that sends camelCase.
COMPARED = {
    "contents": "contents",
    "systemInstruction": "systemInstruction",
    "system_instruction": "systemInstruction",
    "tools": "tools",
    "toolConfig": "toolConfig",
    "tool_config": "toolConfig",
    "cachedContent": "cachedContent",
    "cached_content": "cachedContent",
    # Where a reply that stopped to continue goes on from: each hop of an automatic
    # continuation is a request of its own.
    "continuationToken": "continuationToken",
    "continuation_token": "continuationToken",
}
# The generation config fields that decide the reply's shape; the rest of it is sampling.
CONFIG_COMPARED = {
    "responseSchema": "responseSchema",
    "response_schema": "responseSchema",
    "responseJsonSchema": "responseJsonSchema",
    "response_json_schema": "responseJsonSchema",
    "responseMimeType": "responseMimeType",
    "response_mime_type": "responseMimeType",
}
_CONFIG = ("generationConfig", "generation_config")
# `inlineData.data` holds a file's bytes as base64: a digest stands in at any length.
_BINARY_KEYS = frozenset({"data"})
# `alt=sse` only picks the streaming framing, which the path already says.
_IGNORED_QUERY = frozenset({"alt"})
_STREAM_METHOD = ":streamGenerateContent"
_TAKEN = frozenset((*COMPARED, *_CONFIG))


def canonicalize(parts: RequestParts) -> Canonical:
    body = json_object(parts.json(), ("contents",))
    url = split_url(parts.url)
    stream = url.path.endswith(_STREAM_METHOD)
    compared = _renamed(body, COMPARED)
    meta: dict[str, Any] = rest(body, _TAKEN)
    config = next((body[name] for name in _CONFIG if body.get(name) is not None), None)
    if isinstance(config, dict):
        if shape := _renamed(config, CONFIG_COMPARED):
            compared["generationConfig"] = shape
        if sampling := rest(config, frozenset(CONFIG_COMPARED)):
            meta["generationConfig"] = sampling
        limit = config.get("maxOutputTokens", config.get("max_output_tokens"))
        if isinstance(limit, int):
            meta["max_output_tokens"] = limit  # the spend caps' worst case reads it here
    elif config is not None:
        compared["generationConfig"] = strip_binary(config)  # malformed: compare it whole
    compared["stream"] = stream
    meta["model"] = url.segment(-1).rpartition(":")[0]
    query = {key: value for key, value in url.query if key not in _IGNORED_QUERY}
    if query:
        meta["query"] = query
    return Canonical.build(SURFACE, compared, meta, stream=stream)


def _renamed(source: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for wire, name in names.items():
        value = source.get(wire)
        if value is not None and name not in out:  # camelCase is listed first and wins
            out[name] = strip_binary(value, _BINARY_KEYS)
    return out
