"""Any request no provider route claims: compared on method, path, query and the whole body."""

from __future__ import annotations

from typing import Any

from . import surfaces
from ._canonical import Canonical, RequestParts, binary_digest, canonical_json, strip_binary
from ._url import SECRET_QUERY_PARAMS, split_url

SURFACE = surfaces.GENERIC

# JSON body fields that carry credentials (OAuth exchanges and the like). Dropped like their
# query-string namesakes, so no secret is ever stored and a rotated one changes nothing.
SECRET_BODY_FIELDS = SECRET_QUERY_PARAMS | {
    "client_secret",
    "password",
    "refresh_token",
    "id_token",
}


def canonicalize(parts: RequestParts) -> Canonical:
    """Never raises: an unparseable or pathological body is compared by the digest of its bytes."""
    url = split_url(parts.url)
    compared: dict[str, Any] = {"method": parts.method.upper(), "path": url.path}
    if url.query:
        compared["query"] = sorted([key, value] for key, value in url.query)
    if parts.body:
        compared["body"] = _body(parts)
    # The host is kept out of the comparison: pointing a client at another base URL (a proxy,
    # a regional endpoint) sends the same call.
    meta = {"host": url.host} if url.host else {}
    return Canonical.build(SURFACE, compared, meta, stream=False)


def _body(parts: RequestParts) -> Any:
    parsed = parts.json()
    if parsed is not None or parts.body.strip() == b"null":
        try:
            value = _without_secrets(strip_binary(parsed))
            canonical_json(value)  # proves it serialises before it becomes part of a digest
            return value
        except (RecursionError, ValueError, TypeError):
            pass  # nested past what the serialiser allows: fall through to the raw digest
    return binary_digest(parts.body)


def _without_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _without_secrets(item)
            for key, item in value.items()
            if key.lower() not in SECRET_BODY_FIELDS
        }
    if isinstance(value, list):
        return [_without_secrets(item) for item in value]
    return value
