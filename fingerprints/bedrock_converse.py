"""Amazon Bedrock Converse (`POST /model/<modelId>/converse` and `/converse-stream`)."""

from __future__ import annotations

from typing import Any

from . import surfaces
from ._canonical import Canonical, RequestParts, json_object, pick, rest
from ._url import split_url

SURFACE = surfaces.BEDROCK_CONVERSE

COMPARED = (
    "messages",
    "system",
    "toolConfig",
    "outputConfig",
    "promptVariables",
    "guardrailConfig",
)
# Image, document, video and audio blocks carry `source.bytes` as base64: digest at any length.
_BINARY_KEYS = frozenset({"bytes"})
# A call against a Bedrock prompt ARN may carry only `promptVariables`.
_REQUIRED_ANY = ("messages", "system", "promptVariables")
_TAKEN = frozenset(COMPARED)


def canonicalize(parts: RequestParts) -> Canonical:
    body = json_object(parts.json(), _REQUIRED_ANY)
    url = split_url(parts.url)
    stream = url.path.endswith("/converse-stream")
    compared = pick(body, COMPARED, _BINARY_KEYS)
    compared["stream"] = stream
    meta: dict[str, Any] = rest(body, _TAKEN)
    # botocore percent-encodes the id in the path (an ARN's `:` and `/`).
    meta["modelId"] = url.segment(-2)
    return Canonical.build(SURFACE, compared, meta, stream=stream)
