"""Keeping secrets off disk: what is dropped or masked before anything is written."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "[scrubbed]"

# Request or reply headers that carry credentials or session state.
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
        "x-amz-security-token",
    }
)

# Reply headers that describe the transfer rather than the reply: a replay re-frames the body.
TRANSFER_HEADERS = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"}
)

SECRET_QUERY_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "api-key",
        "apikey",
        "access_token",
        "token",
        "sig",
        "signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
    }
)

# Secret-shaped values: provider keys, bearer tokens, AWS ids and signatures, OAuth tokens.
# Every alternative begins with a literal (so the engine skips to the bytes that may start one),
# and at most one of them can match at any position (their first two bytes differ), so their
# order does not matter. `bearer` is in any case, spelled out: `(?i:...)` would hide the prefix.
_BEARER = rb"[Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=\-]{12,}"
_SECRET_PATTERNS = re.compile(
    rb"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"
    rb"|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}"
    rb"|AIza[0-9A-Za-z_\-]{30,}"
    rb"|ya29\.[0-9A-Za-z_\-.]{20,}"
    rb"|B" + _BEARER + rb"|b" + _BEARER + rb"|Credential=[^,\s\"]+"
    rb"|Signature=[0-9a-fA-F]{32,}"
)
# What each alternative begins with: bytes holding none of these (`bearer` in any case) hold
# nothing secret-shaped, found with a few substring searches instead of the pattern's scan.
_PATTERN_STARTS = (b"sk-", b"AKIA", b"ASIA", b"AIza", b"ya29.", b"Credential=", b"Signature=")


def _may_hold_pattern(data: bytes) -> bool:
    return any(start in data for start in _PATTERN_STARTS) or b"bearer" in data.lower()


def secret_values(headers: Mapping[str, str], url: str) -> list[bytes]:
    """The literal credentials a request carries, so they can be masked wherever they echo."""
    found: list[str] = []
    for name in headers:  # names first: an HTTP stack's mapping decodes a value when asked
        if name.lower() not in SECRET_HEADERS or not (value := headers[name]):
            continue
        # A header sent twice reads as one value, the two joined by ", " (httpx's mapping, the
        # proxy's): each is a secret of its own, wherever one echoes alone.
        for one in (value, *value.split(", ")) if ", " in value else (value,):
            found.append(one)
            scheme, _, token = one.partition(" ")
            if token and scheme.lower() in {"bearer", "basic", "token"}:
                found.append(token)
    found += _query_secrets(url)
    # Short values (a user id, "true") would mask innocent text; credentials are long.
    return sorted({v.encode() for v in found if len(v) >= 8}, key=len, reverse=True)


# A process sends few distinct URLs: what is found in each is kept (it holds nothing the process
# does not hold already), so a recording parses its URL's query once.
@lru_cache(maxsize=256)
def _query_secrets(url: str) -> tuple[str, ...]:
    if "?" not in url:
        return ()
    query = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    return tuple(value for name, value in query if name.lower() in SECRET_QUERY_PARAMS and value)


def scrub_bytes(data: bytes, secrets: Iterable[bytes] = (), *, patterns: bool = False) -> bytes:
    """Mask the given literal secrets and, with `patterns`, anything secret-shaped."""
    for secret in secrets:
        if secret in data:
            data = data.replace(secret, MASK.encode())
    if patterns and _may_hold_pattern(data):
        data = _SECRET_PATTERNS.sub(MASK.encode(), data)
    return data


def holds_secret(texts: list[bytes], secrets: Iterable[bytes]) -> bool:
    """Whether any of `texts` holds one of `secrets` or anything secret-shaped (what
    `scrub_bytes` with `patterns` masks). They are searched as one, joined by newlines, which
    JSON text never holds raw: a match that spans two would only be a false alarm."""
    joined = b"\n".join(texts)
    if any(secret in joined for secret in secrets):
        return True
    return _may_hold_pattern(joined) and _SECRET_PATTERNS.search(joined) is not None


def scrub_frames(
    frames: list[bytes], secrets: Iterable[bytes] = (), *, patterns: bool = False
) -> list[bytes]:
    """Mask secrets in a reply as a whole, keeping its frame boundaries.

    A transport chunk may end in the middle of a credential, so each frame alone may hold only
    part of it. The secrets are found in the joined body; each is replaced by one mask placed in
    the frame where it starts, and its rest is cut from the frames it ran into. Every other byte
    stays in its own frame, so a replay is chunked as the live reply was. A frame left empty (it
    held only the middle of a secret) is dropped.
    """
    body = b"".join(frames)
    spans = [span for secret in secrets for span in _occurrences(body, secret)]
    if patterns and _may_hold_pattern(body):
        spans += [m.span() for m in _SECRET_PATTERNS.finditer(body)]
    if not spans:
        return frames
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[bytes] = []
    offset = 0
    index = 0  # the first merged span that may still touch this frame
    for frame in frames:
        start, end = offset, offset + len(frame)
        offset = end
        piece = bytearray()
        at = start
        while index < len(merged) and merged[index][0] < end:
            span_start, span_end = merged[index]
            if span_start >= at:
                piece += body[at:span_start] + MASK.encode()
            at = max(at, min(span_end, end))
            if span_end > end:
                break  # the secret runs on into the next frame
            index += 1
        piece += body[at:end]
        if piece or not frame:
            out.append(bytes(piece))
    return out


def _occurrences(body: bytes, secret: bytes) -> Iterator[tuple[int, int]]:
    """The spans of `secret` in `body`, left to right, none overlapping (as `re.finditer`)."""
    at = body.find(secret)
    while at >= 0:
        yield at, at + len(secret)
        at = body.find(secret, at + len(secret))


def scrub_values(pairs: list[tuple[str, str]], secrets: list[bytes]) -> list[tuple[str, str]]:
    """Header pairs with the given literal secrets masked in their values (the list itself when
    none holds one: the common case is found with one search per secret)."""
    values = "\n".join([value for _, value in pairs]).encode()
    if not any(secret in values for secret in secrets):
        return pairs
    return [(name, scrub_bytes(value.encode(), secrets).decode()) for name, value in pairs]


def scrub_text(text: str, secrets: Iterable[bytes] = ()) -> str:
    return scrub_bytes(text.encode(), secrets, patterns=True).decode("utf-8", "replace")


@lru_cache(maxsize=256)  # as `_query_secrets`
def scrub_url(url: str) -> str:
    """The URL without user info and without secret query parameters."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    query = urlencode(
        [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k.lower() not in SECRET_QUERY_PARAMS
        ]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def kept_reply_headers(
    headers: Iterable[tuple[str, str]], *, keep_encoding: bool = False
) -> list[tuple[str, str]]:
    """Reply headers worth replaying: no credentials, no cookies, no transfer framing
    (`content-encoding` stays when the body is kept encoded)."""
    dropped = TRANSFER_HEADERS - {"content-encoding"} if keep_encoding else TRANSFER_HEADERS
    return [
        (name, value)
        for name, value in headers
        if (lowered := name.lower()) not in SECRET_HEADERS and lowered not in dropped
    ]
