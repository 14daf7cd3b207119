"""Which headers cross the proxy, both ways. Pure tables and filters over raw header pairs."""

from __future__ import annotations

from collections.abc import Iterable

from pyrula.fingerprints import joined_headers

from pyrula.transport.framing import decoder_for

RawHeaders = list[tuple[bytes, bytes]]

CASSETTE_HEADER = b"x-pyrula-cassette"  # selects the cassette namespace of one request
TOKEN_HEADER = b"x-pyrula-token"  # the proxy's bearer token, when not in Proxy-Authorization

# Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, never the exchange.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)

# Request headers the proxy consumes or that the upstream client derives again itself.
_NOT_FORWARDED = HOP_BY_HOP | {b"host", b"content-length", b"expect", CASSETTE_HEADER, TOKEN_HEADER}


def _connection_listed(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Names a `Connection` header marks as hop-by-hop for this connection only."""
    listed: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            listed.update(token.strip().lower() for token in value.split(b","))
    return frozenset(listed)


def upstream_request(headers: RawHeaders) -> RawHeaders:
    """The client's request headers as sent upstream: credentials included, hop-by-hop not."""
    listed = _connection_listed(headers)
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in _NOT_FORWARDED and name.lower() not in listed
    ]


def decodable_encodings(headers: RawHeaders) -> RawHeaders:
    """Narrow `Accept-Encoding` to codings a recording can decode (gzip, deflate, identity).

    A reply in any other coding (br, zstd) would be kept as sent, and a later client replaying
    it might not read it. The client offered these codings itself, so it reads what comes back.
    """
    out: RawHeaders = []
    for name, value in headers:
        if name.lower() != b"accept-encoding":
            out.append((name, value))
            continue
        kept = [
            token.strip()
            for token in value.split(b",")
            if decoder_for(token.split(b";")[0].strip().decode("latin-1")) is not None
        ]
        if kept:
            out.append((name, b", ".join(kept)))
    return out


def client_reply(headers: RawHeaders, *, keep_length: bool) -> RawHeaders:
    """An upstream reply's headers as sent to the client (framing is re-done by the proxy)."""
    listed = _connection_listed(headers)
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in HOP_BY_HOP
        and name.lower() not in listed
        and (keep_length or name.lower() != b"content-length")
    ]


def without(headers: RawHeaders, names: Iterable[bytes]) -> RawHeaders:
    """`headers` less every one named in `names` (lower-case)."""
    dropped = frozenset(names)
    return [(name, value) for name, value in headers if name.lower() not in dropped]


def joined(headers: RawHeaders) -> dict[str, str]:
    """Lower-cased names to values, repeats joined by ', ': the view fingerprints read."""
    out: dict[str, str] = joined_headers(
        (name.decode("ascii", "replace"), text(value)) for name, value in headers
    )
    return out


def text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def first(headers: RawHeaders, name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None
