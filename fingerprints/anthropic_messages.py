"""Anthropic Messages: the direct API, and the same body on Bedrock (`invoke`) and Vertex
(`rawPredict`), where the model and the streaming choice move into the URL."""

from __future__ import annotations

from typing import Any

from . import surfaces
from ._canonical import Canonical, NotThisSurface, RequestParts, json_object, pick, rest
from ._url import Url, split_url

SURFACE = surfaces.ANTHROPIC_MESSAGES
BETA_SURFACE = surfaces.ANTHROPIC_BETA_MESSAGES

COMPARED = ("system", "messages", "tools", "tool_choice", "output_config", "container")
# Only a beta call can carry these. They are compared whenever present, beta marker or not:
# anthropic 2.x sends `beta.messages.create` without `?beta=true`, and a call without `betas`
# has no header either, yet a changed `thread` or `compaction` is still a different call.
BETA_COMPARED = ("output_format", "context_management", "compaction", "fallbacks", "thread")

BETA_HEADER = "anthropic-beta"
_BEDROCK_STREAM = "/invoke-with-response-stream"
_VERTEX_STREAM = ":streamRawPredict"
_TAKEN = frozenset((*COMPARED, *BETA_COMPARED, "stream", "anthropic_beta"))


def canonicalize(parts: RequestParts) -> Canonical:
    url = split_url(parts.url)
    body = json_object(parts.json(), ("messages",))
    meta: dict[str, Any] = rest(body, _TAKEN)
    stream = body.get("stream") is True
    if url.path.endswith(("/invoke", _BEDROCK_STREAM)):
        # Bedrock's invoke serves every vendor's models; only Anthropic's body names a version.
        if "anthropic_version" not in body:
            raise NotThisSurface("a Bedrock invoke body without anthropic_version")
        meta["platform"] = "bedrock"
        meta["model"] = url.segment(-2)  # /model/<id>/invoke
        stream = stream or url.path.endswith(_BEDROCK_STREAM)
    elif url.path.endswith(("RawPredict", "rawPredict")):
        meta["platform"] = "vertex"
        meta["model"] = url.segment(-1).rpartition(":")[0]  # .../models/<id>:rawPredict
        stream = stream or url.path.endswith(_VERTEX_STREAM)

    compared = pick(body, (*COMPARED, *BETA_COMPARED))
    betas = _betas(parts, body, url)
    if betas is not None:
        compared["betas"] = betas
    compared["stream"] = stream
    surface = SURFACE if betas is None else BETA_SURFACE
    return Canonical.build(surface, compared, meta, stream=stream)


def _betas(parts: RequestParts, body: dict[str, Any], url: Url) -> list[str] | None:
    """The beta flags in force, sorted; None for a call that is not a beta call.

    The direct API carries them in the header; Bedrock copies them into the body (and may keep
    the header); Vertex keeps only the header. Their union covers all three.
    """
    header = parts.headers.get(BETA_HEADER)
    in_body = body.get("anthropic_beta")
    if header is None and in_body is None and url.param("beta") != "true":
        return None
    names: set[str] = set()
    if header is not None:
        names.update(header.split(","))
    if isinstance(in_body, str):
        names.update(in_body.split(","))
    elif isinstance(in_body, list):
        names.update(name for name in in_body if isinstance(name, str))
    return sorted({name.strip() for name in names} - {""})
