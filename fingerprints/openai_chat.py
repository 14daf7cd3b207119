"""OpenAI chat completions (`POST .../chat/completions`): OpenAI, Azure deployments, and the
OpenAI-compatible providers (`openai_compatible`), whose name is kept in `meta["provider"]`."""

from __future__ import annotations

from typing import Any

from . import openai_compatible, surfaces
from ._canonical import Canonical, RequestParts, json_object, pick, rest
from ._url import split_url

SURFACE = surfaces.OPENAI_CHAT

# What decides the reply's content and shape. Model and sampling are left out on purpose: a
# resumed run may switch model or temperature without its recorded calls becoming invalid.
COMPARED = (
    "messages",
    "tools",
    "functions",  # legacy tool list
    "function_call",  # legacy tool_choice
    "tool_choice",
    "response_format",
    "n",
    "prediction",
    "audio",
    "modalities",
)

_TAKEN = frozenset((*COMPARED, "stream"))


def canonicalize(parts: RequestParts) -> Canonical:
    body = json_object(parts.json(), ("messages",))
    stream = body.get("stream") is True
    compared = pick(body, COMPARED)
    if compared.get("n") == 1 and type(compared["n"]) is int:
        del compared["n"]  # the provider's default: sending it or not is the same call
    compared["stream"] = stream
    meta: dict[str, Any] = rest(body, _TAKEN)
    url = split_url(parts.url)
    _, azure, tail = url.path.partition("/deployments/")
    if azure:
        meta["deployment"] = tail.partition("/")[0]
    if url.query:
        meta["query"] = dict(url.query)
    if provider := openai_compatible.provider_of(parts.url):
        meta["provider"] = provider
    return Canonical.build(SURFACE, compared, meta, stream=stream)
