"""The digest of a request as sent: every byte a canonicalizer reads, and no secret.

A store keeps an index from this digest to the request's fingerprint (`journal.sent_index`), so a
replay of a request recorded before, but new to the process, finds its fingerprint with one hash
over bytes already in hand instead of parsing, stripping and re-serialising the body.

What it covers: the format version of the fingerprints, the method, the URL's host, path and
query (through `split_url`, so without user info and without secret query parameters such as
Gemini's `key=`), the values of the headers the route's canonicalizer reads (`HEADERS_READ`: no
credential header is ever one of them) and the body's bytes. Any request that differs in a byte a
canonicalizer reads has another digest; a request that differs only in its credentials has the
same one.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any

from ._canonical import FORMAT_VERSION, Canonical, RequestParts, ascii_json
from ._router import HEADERS_READ, Canonicalizer, cached, route_for
from ._url import split_url
from .surfaces import GENERIC


def sent_digest(parts: RequestParts) -> bytes:
    """32 bytes of BLAKE2b over what every canonicalizer reads of `parts`, secrets left out."""
    _canonicalizer, reads, prefix = _route(parts.method, parts.url)
    return _digest(parts, reads, prefix)


def cached_or_sent(parts: RequestParts) -> Canonical | bytes:
    """The request's canonical form if this process made it recently (`canonicalize`'s cache),
    else its `sent_digest`: what a replay looks a request up by, whichever is cheaper."""
    canonicalizer, reads, prefix = _route(parts.method, parts.url)
    return cached(parts, canonicalizer) or _digest(parts, reads, prefix)


# A run sends few distinct URLs: per method and URL, the route's canonicalizer, the headers it
# reads, and the hash of the digest's head (the format version, method, host, path and query
# without secrets, as ASCII JSON), copied for each request.
@lru_cache(maxsize=1024)
def _route(method: str, url: str) -> tuple[Canonicalizer, tuple[str, ...] | None, Any]:
    parsed = split_url(url)
    canonicalizer = route_for(method, parsed.path)
    head = ascii_json([FORMAT_VERSION, method, parsed.host, parsed.path, parsed.query])
    return canonicalizer, HEADERS_READ.get(canonicalizer), hashlib.blake2b(head, digest_size=32)


def _digest(parts: RequestParts, reads: tuple[str, ...] | None, prefix: Any) -> bytes:
    digest = prefix.copy()
    if reads is not None:  # set by the route, so its presence is fixed by the head
        digest.update(ascii_json([parts.headers.get(name) for name in reads]))
    # JSON holds no raw newline, so the newline ends the head unambiguously.
    digest.update(b"\n")
    digest.update(parts.body)
    result: bytes = digest.digest()
    return result


def indexable(surface: str) -> bool:
    """Whether a request of `surface` may be indexed by its sent digest. Not a generic one: its
    canonicalizer drops credential fields of the body (`client_secret`, `password`), which the
    digest of the body's bytes would cover."""
    return surface != GENERIC
