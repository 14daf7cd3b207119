"""Which canonicalizer fingerprints a request: one table of routes, first match wins."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from . import anthropic_messages, bedrock_converse, gemini, generic, openai_chat, openai_responses
from ._canonical import Canonical, RequestParts
from ._url import split_url
from .bounded import BoundedCache

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


# The request headers a canonicalizer reads (`parts.headers`), by canonicalizer: part of the cache
# key below. A canonicalizer that starts reading a header must be listed here with it.
HEADERS_READ: dict[Canonicalizer, tuple[str, ...]] = {
    anthropic_messages.canonicalize: (anthropic_messages.BETA_HEADER,),
}

# Recent requests' canonical forms, keyed by everything a canonicalizer reads (method, URL, body,
# the headers in HEADERS_READ): a repeated request (a replayed test's calls, a retry, the proxy's
# many clients asking the same thing) skips parsing, stripping and hashing its body. Exact: the
# key is the bytes themselves, compared in full on a hit. Bounded: bodies up to
# _CACHE_BODY_BYTES, at most 8 MiB of them in all, oldest dropped first (`BoundedCache`). The cached
# `Canonical` is shared between calls, so nothing may change its `compared` or `meta` (nothing
# does).
_CACHE_BODY_BYTES = 64 * 1024
_Key = tuple[str, str, bytes, tuple[str | None, ...]]
_cache: BoundedCache[_Key, Canonical] = BoundedCache(
    8 * 1024 * 1024, lambda key: len(key[2]) + len(key[1]) + 256
)


def _cache_key(parts: RequestParts, canonicalizer: Canonicalizer) -> _Key:
    reads = HEADERS_READ.get(canonicalizer)
    headers = () if reads is None else tuple(parts.headers.get(h) for h in reads)
    return (parts.method, parts.url, parts.body, headers)


def cached(parts: RequestParts, canonicalizer: Canonicalizer) -> Canonical | None:
    """The request's canonical form if this process made it recently, else None (nothing is
    computed): a caller with a cheaper way to a new request's fingerprint asks this first."""
    if len(parts.body) > _CACHE_BODY_BYTES:
        return None
    return _cache.get(_cache_key(parts, canonicalizer))


def canonicalize(parts: RequestParts) -> Canonical:
    """Fingerprint one request. Never raises, whatever the body holds."""
    canonicalizer = route_for(parts.method, split_url(parts.url).path)
    if len(parts.body) > _CACHE_BODY_BYTES:
        return _canonicalize(parts, canonicalizer)
    key = _cache_key(parts, canonicalizer)
    canonical = _cache.get(key)
    if canonical is None:
        canonical = _canonicalize(parts, canonicalizer)
        _cache.put(key, canonical)
    return canonical


def _canonicalize(parts: RequestParts, canonicalizer: Canonicalizer) -> Canonical:
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
