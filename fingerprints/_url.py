"""Splitting a request URL into the parts fingerprints read, with secrets already gone."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qsl, unquote, urlsplit

# Query parameters that carry credentials (Gemini's `key=`, presigned AWS and Azure SAS URLs).
# They are dropped, never digested: a rotated key must not change a fingerprint.
SECRET_QUERY_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "api-key",
        "apikey",
        "token",
        "access_token",
        "x-amz-security-token",
        "x-amz-signature",
        "x-amz-credential",
        "sig",
        "signature",
    }
)


@dataclass(frozen=True, slots=True)
class Url:
    host: str  # host[:port], without any user:password@
    path: str
    query: tuple[tuple[str, str], ...]  # in request order, secret parameters removed

    def param(self, name: str) -> str | None:
        for key, value in self.query:
            if key == name:
                return value
        return None

    def segment(self, index: int) -> str:
        """One path segment, percent-decoded (where Bedrock, Gemini and Vertex put the model)."""
        segments = self.path.split("/")
        return unquote(segments[index]) if -len(segments) <= index < len(segments) else ""


# Every replayed request parses its URL, and a run sends few distinct ones: cache the split.
@lru_cache(maxsize=1024)
def split_url(url: str) -> Url:
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: treat the whole thing as a path
        return Url(host="", path=url or "/", query=())
    host = parts.netloc.rpartition("@")[2].lower()
    query = tuple(
        (key, value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if key.lower() not in SECRET_QUERY_PARAMS
    )
    return Url(host=host, path=parts.path or "/", query=query)
