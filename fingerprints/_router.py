"""Which canonicalizer fingerprints a request: one table of routes, first match wins."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from . import anthropic_messages, bedrock_converse, gemini, generic, openai_chat, openai_responses
from ._canonical import Canonical, RequestParts
from ._url import split_url

Canonicalizer = Callable[[RequestParts], Canonical]


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: re.Pattern[str]  # searched in the URL path; anchored at the end so prefixes are free
    canonicalize: Canonicalizer


def _route(method: str, path: str, canonicalize: Canonicalizer) -> Route:
    return Route(method, re.compile(path), canonicalize)


# Paths are matched by their tail, so any base URL (a proxy, Azure's /openai/deployments/<d>,
# Vertex's /projects/<p>/locations/<r>) reaches the same row. The OpenAI-compatible providers
# (Mistral, Groq, ..., a local Ollama or vLLM) reach the first two rows by their OpenAI paths;
# `openai_compatible` names the provider from the host, into `meta["provider"]`.
ROUTES: tuple[Route, ...] = (
    _route("POST", r"/chat/completions$", openai_chat.canonicalize),
    _route("POST", r"/responses$", openai_responses.canonicalize),
    _route("POST", r"/v1/messages$", anthropic_messages.canonicalize),
    _route(
        "POST",
        r"/model/[^/]+/invoke(?:-with-response-stream)?$",
        anthropic_messages.canonicalize,
    ),
    _route(
        "POST",
        # count-tokens shares the verb but is not a generation.
        r"/publishers/anthropic/models/(?!count-tokens:)[^/]+:(?:rawPredict|streamRawPredict)$",
        anthropic_messages.canonicalize,
    ),
    _route(
        "POST",
        r"/(?:models|tunedModels)/[^/]+:(?:generateContent|streamGenerateContent)$",
        gemini.canonicalize,
    ),
    _route("POST", r"/model/[^/]+/(?:converse|converse-stream)$", bedrock_converse.canonicalize),
)


@lru_cache(maxsize=1024)
def route_for(method: str, path: str) -> Canonicalizer:
    """The canonicalizer of the first matching row, else the generic one."""
    method = method.upper()
    for route in ROUTES:
        if route.method == method and route.path.search(path):
            return route.canonicalize
    return generic.canonicalize


def canonicalize(parts: RequestParts) -> Canonical:
    """Fingerprint one request. Never raises, whatever the body holds."""
    canonicalizer = route_for(parts.method, split_url(parts.url).path)
    if canonicalizer is generic.canonicalize:
        return generic.canonicalize(parts)
    try:
        return canonicalizer(parts)
    # Fingerprinting must never fail a call, and the generic form compares the whole body, so
    # falling back can only make a replay stricter, never let a different request through.
    except Exception:
        return generic.canonicalize(parts)


def surface_of(parts: RequestParts) -> str:
    """The surface a request is fingerprinted as (`openai.chat`, ..., `generic`)."""
    return canonicalize(parts).surface
