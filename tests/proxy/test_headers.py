"""Which headers cross the proxy, both ways: dropped, kept, narrowed (proxy/headers.py)."""

from __future__ import annotations

import importlib.util

import pytest
from pyrula.proxy.headers import (
    CASSETTE_HEADER,
    HOP_BY_HOP,
    TOKEN_HEADER,
    client_reply,
    decodable_encodings,
    first,
    joined,
    upstream_request,
)

from pyrula.transport.core import header_bytes

CREDENTIALS = [
    (b"authorization", b"Bearer sk-live"),
    (b"x-api-key", b"sk-ant-live"),
    (b"x-goog-api-key", b"AIza-live"),
    (b"anthropic-version", b"2023-06-01"),
]

# -- client -> provider -----------------------------------------------------------------------


def test_hop_by_hop_and_proxy_headers_are_not_forwarded_but_credentials_are():
    sent = [
        (b"authorization", b"Bearer sk-live"),
        (b"connection", b"keep-alive, x-private"),
        (b"x-private", b"1"),
        (b"proxy-authorization", b"Bearer t"),
        (b"x-pyrula-cassette", b"c"),
        (b"host", b"proxy"),
        (b"content-length", b"3"),
        (b"anthropic-beta", b"tools"),
    ]
    assert upstream_request(sent) == [
        (b"authorization", b"Bearer sk-live"),
        (b"anthropic-beta", b"tools"),
    ]


@pytest.mark.parametrize("name", sorted(HOP_BY_HOP))
def test_each_hop_by_hop_header_stays_with_the_proxy(name):
    assert upstream_request([(name, b"x"), *CREDENTIALS]) == CREDENTIALS
    assert client_reply([(name, b"x"), (b"x-request-id", b"r")], keep_length=True) == [
        (b"x-request-id", b"r")
    ]


@pytest.mark.parametrize(
    "name", [b"host", b"content-length", b"expect", CASSETTE_HEADER, TOKEN_HEADER]
)
def test_what_the_proxy_consumes_or_derives_again_is_not_forwarded(name):
    assert upstream_request([*CREDENTIALS, (name, b"v")]) == CREDENTIALS


def test_names_match_whatever_their_case_and_order_and_repeats_are_kept():
    sent = [
        (b"Connection", b"X-Trace"),
        (b"X-Trace", b"1"),
        (b"Host", b"proxy"),
        (b"X-Pyrula-Token", b"secret-token-0123456789"),
        (b"Cookie", b"a=1"),
        (b"Authorization", b"Bearer sk"),
        (b"Cookie", b"b=2"),
    ]
    assert upstream_request(sent) == [
        (b"Cookie", b"a=1"),
        (b"Authorization", b"Bearer sk"),
        (b"Cookie", b"b=2"),
    ]


def test_accept_encoding_narrows_to_codings_a_recording_can_decode():
    # br and zstd are decoded when the modules httpx uses for them are installed.
    br = importlib.util.find_spec("brotli") or importlib.util.find_spec("brotlicffi")
    zstd = importlib.util.find_spec("zstandard")
    offered = [(b"accept-encoding", b"gzip, br;q=1.0, zstd, deflate"), (b"x-a", b"1")]
    kept = b", ".join(
        [b"gzip", *([b"br;q=1.0"] if br else []), *([b"zstd"] if zstd else []), b"deflate"]
    )
    assert decodable_encodings(offered) == [(b"accept-encoding", kept), (b"x-a", b"1")]
    assert decodable_encodings([(b"accept-encoding", b"compress, x-custom")]) == []
    assert decodable_encodings([(b"Accept-Encoding", b"identity;q=0.5, compress")]) == [
        (b"Accept-Encoding", b"identity;q=0.5")
    ]
    assert decodable_encodings(CREDENTIALS) == CREDENTIALS


# -- provider -> client -----------------------------------------------------------------------


def test_a_reply_loses_its_framing_headers_and_keeps_the_rest():
    reply = [(b"content-length", b"5"), (b"transfer-encoding", b"chunked"), (b"x-request-id", b"r")]
    assert client_reply(reply, keep_length=False) == [(b"x-request-id", b"r")]
    assert client_reply(reply, keep_length=True) == [
        (b"content-length", b"5"),
        (b"x-request-id", b"r"),
    ]


def test_a_reply_drops_what_its_connection_header_lists_and_keeps_repeated_cookies():
    reply = [
        (b"Connection", b"close, X-Upstream-Hop"),
        (b"X-Upstream-Hop", b"1"),
        (b"set-cookie", b"a=1"),
        (b"set-cookie", b"b=2"),
        (b"openai-processing-ms", b"12"),
    ]
    assert client_reply(reply, keep_length=True) == [
        (b"set-cookie", b"a=1"),
        (b"set-cookie", b"b=2"),
        (b"openai-processing-ms", b"12"),
    ]


# -- the views the rest of the proxy reads ----------------------------------------------------


def test_joined_is_what_fingerprints_read():
    raw = [(b"Accept", b"a"), (b"accept", b"b"), (b"X-Name", "é".encode()), (b"x-raw", b"\xe9")]
    assert joined(raw) == {"accept": "a, b", "x-name": "é", "x-raw": "é"}


def test_first_matches_the_exact_name_and_header_bytes_writes_raw_pairs():
    raw = header_bytes([("x-pyrula-cassette", "ns-1"), ("x-pyrula-cassette", "ns-2"), ("x-a", "ü")])
    assert raw[2] == (b"x-a", "ü".encode())
    assert first(raw, CASSETTE_HEADER) == b"ns-1"
    assert first(raw, TOKEN_HEADER) is None
