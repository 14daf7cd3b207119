"""The digest of a request as sent: it changes with every byte a canonicalizer reads, and with
nothing a credential is made of."""

from __future__ import annotations

import json

import pytest
from pyrula.fingerprints import (
    RequestParts,
    cached_or_sent,
    canonicalize,
    indexable,
    sent_digest,
    surfaces,
)

CHAT = "https://api.openai.com/v1/chat/completions"
MESSAGES = "https://api.anthropic.com/v1/messages"
GEMINI = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"


def _body(text: str = "Ping?") -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()


def _parts(url: str = CHAT, body: bytes | None = None, **headers: str) -> RequestParts:
    return RequestParts("POST", url, headers, _body() if body is None else body)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            _parts(authorization="Bearer sk-one-0123456789"),
            _parts(authorization="Bearer sk-two-9876543210"),
        ),
        (
            _parts(MESSAGES, **{"x-api-key": "sk-ant-one-0123456789"}),
            _parts(MESSAGES, **{"x-api-key": "sk-ant-two-9876543210"}),
        ),
        (_parts(GEMINI + "?key=AIzaOne0123456789"), _parts(GEMINI + "?key=AIzaTwo9876543210")),
        (_parts(GEMINI, **{"x-goog-api-key": "AIzaOne0123456789"}), _parts(GEMINI)),
        (
            _parts("https://user:secret-one@api.openai.com/v1/chat/completions"),
            _parts("https://user:secret-two@api.openai.com/v1/chat/completions"),
        ),
        (
            _parts(CHAT + "?api-version=1&sig=one0123456789"),
            _parts(CHAT + "?api-version=1&sig=two9876543210"),
        ),
    ],
    ids=["bearer", "x-api-key", "gemini-key-param", "goog-header", "user-info", "sas-sig"],
)
def test_requests_differing_only_in_credentials_share_a_digest(first, second):
    assert sent_digest(first) == sent_digest(second)


@pytest.mark.parametrize(
    "changed",
    [
        _parts(body=_body("Ping!")),
        _parts(body=_body() + b" "),
        RequestParts("PUT", CHAT, {}, _body()),
        _parts("https://api.openai.com/v2/chat/completions"),
        _parts("https://proxy.test/v1/chat/completions"),
        _parts(CHAT + "?api-version=2"),
    ],
    ids=["body-text", "body-whitespace", "method", "path", "host", "query"],
)
def test_a_request_differing_in_any_byte_a_canonicalizer_reads_has_another_digest(changed):
    assert sent_digest(changed) != sent_digest(_parts())


def test_the_headers_a_canonicalizer_reads_are_covered():
    plain = _parts(MESSAGES)
    beta = _parts(MESSAGES, **{"anthropic-beta": "prompt-caching-2024-07-31"})
    assert canonicalize(plain).digest != canonicalize(beta).digest
    assert sent_digest(plain) != sent_digest(beta)
    # On a route whose canonicalizer reads no header, no header counts.
    assert sent_digest(_parts(**{"anthropic-beta": "x"})) == sent_digest(_parts())


def test_cached_or_sent_gives_the_canonical_form_only_once_the_process_has_made_it():
    parts = _parts(body=_body("asked once by test_sent"))
    assert cached_or_sent(parts) == sent_digest(parts)
    canonical = canonicalize(parts)
    assert cached_or_sent(parts) is canonical


def test_generic_requests_are_not_indexed_since_their_body_may_hold_a_dropped_secret():
    generic = canonicalize(
        RequestParts("POST", "https://auth.test/token", {}, b'{"client_secret": "s3cr3t"}')
    )
    assert generic.surface == surfaces.GENERIC
    assert not indexable(generic.surface)
    assert indexable(canonicalize(_parts()).surface)
