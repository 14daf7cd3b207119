from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyrula.fingerprints import (
    FORMAT_VERSION,
    RequestParts,
    canonical_json,
    canonicalize,
    surface_of,
)
from pyrula.fingerprints._router import ROUTES

from tests.fingerprints.support import post

CHAT = {"messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC_ON_BEDROCK = {**CHAT, "anthropic_version": "bedrock-2023-05-31"}
GEMINI = {"contents": [{"parts": [{"text": "hi"}]}]}
RESPONSES = {"input": "hi"}
VERTEX = "https://x-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers"

ROUTED = [
    ("POST", "https://api.openai.com/v1/chat/completions", CHAT, "openai.chat"),
    (
        "POST",
        "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=1",
        CHAT,
        "openai.chat",
    ),
    (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        CHAT,
        "openai.chat",
    ),
    ("POST", "https://api.openai.com/v1/responses", RESPONSES, "openai.responses"),
    ("POST", "https://api.anthropic.com/v1/messages", CHAT, "anthropic.messages"),
    ("POST", "https://api.anthropic.com/v1/messages?beta=true", CHAT, "anthropic.beta.messages"),
    (
        "POST",
        "https://bedrock-runtime.x.amazonaws.com/model/m/invoke",
        ANTHROPIC_ON_BEDROCK,
        "anthropic.messages",
    ),
    (
        "POST",
        "https://bedrock-runtime.x.amazonaws.com/model/m/invoke-with-response-stream",
        ANTHROPIC_ON_BEDROCK,
        "anthropic.messages",
    ),
    ("POST", f"{VERTEX}/anthropic/models/claude:rawPredict", CHAT, "anthropic.messages"),
    ("POST", f"{VERTEX}/anthropic/models/claude:streamRawPredict", CHAT, "anthropic.messages"),
    (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent",
        GEMINI,
        "gemini.generate",
    ),
    (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/tunedModels/t:streamGenerateContent?alt=sse",
        GEMINI,
        "gemini.generate",
    ),
    ("POST", f"{VERTEX}/google/models/gemini:generateContent", GEMINI, "gemini.generate"),
    ("POST", "https://bedrock-runtime.x.amazonaws.com/model/m/converse", CHAT, "bedrock.converse"),
    (
        "POST",
        "https://bedrock-runtime.x.amazonaws.com/model/m/converse-stream",
        CHAT,
        "bedrock.converse",
    ),
    # Everything else, including near misses, is generic.
    ("GET", "https://api.openai.com/v1/chat/completions", None, "generic"),
    ("POST", "https://api.openai.com/v1/chat/completions/abc", CHAT, "generic"),
    ("POST", "https://api.openai.com/v1/responses/resp_1/cancel", None, "generic"),
    ("POST", "https://api.openai.com/v1/responses/input_tokens", RESPONSES, "generic"),
    ("POST", "https://api.openai.com/v1/embeddings", {"input": "hi"}, "generic"),
    ("POST", "https://api.anthropic.com/v1/messages/count_tokens", CHAT, "generic"),
    ("POST", "https://api.anthropic.com/v1/messages/batches", CHAT, "generic"),
    ("POST", "https://api.openai.com/v1/threads/t/messages", CHAT, "generic"),
    ("POST", f"{VERTEX}/anthropic/models/count-tokens:rawPredict", CHAT, "generic"),
    (
        "POST",
        "https://generativelanguage.googleapis.com/v1beta/models/g:countTokens",
        GEMINI,
        "generic",
    ),
    ("POST", "https://api.openai.com/v1/chat/completions", {"prompt": "not chat"}, "generic"),
    ("POST", "https://api.openai.com/v1/chat/completions", [1, 2], "generic"),
]


@pytest.mark.parametrize(("method", "url", "body", "surface"), ROUTED)
def test_each_request_reaches_the_surface_the_table_names(
    method: str, url: str, body: Any, surface: str
) -> None:
    raw = b"" if body is None else json.dumps(body).encode()
    assert surface_of(RequestParts(method, url, {}, raw)) == surface


def test_every_route_row_is_reached_by_some_case() -> None:
    reached = {
        route.path.pattern
        for route in ROUTES
        for method, url, _, surface in ROUTED
        if surface != "generic" and route.path.search(url.partition("?")[0])
    }
    assert reached == {route.path.pattern for route in ROUTES}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{not json", id="not json"),
        pytest.param(b"\xff\xfe\x00garbage", id="not utf-8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested past the parser"),
        pytest.param(b'{"messages": ' + b"[" * 900 + b"]" * 900 + b"}", id="nested near the limit"),
        pytest.param(b'{"messages": "\\ud800"}', id="lone surrogate"),
        pytest.param(b'{"messages": [NaN, Infinity]}', id="non-finite numbers"),
    ],
)
def test_a_broken_body_on_a_provider_route_still_fingerprints_the_same_way_twice(
    body: bytes,
) -> None:
    canonical = canonicalize(
        RequestParts("POST", "https://api.openai.com/v1/chat/completions", {}, body)
    )
    assert canonical.digest
    assert canonical == canonicalize(
        RequestParts("POST", "https://api.openai.com/v1/chat/completions", {}, body)
    )


def test_the_digest_hashes_the_canonical_form_with_the_format_version() -> None:
    canonical = canonicalize(post("https://api.openai.com/v1/chat/completions", CHAT))
    wrapper = {"v": FORMAT_VERSION, "surface": canonical.surface, "compared": canonical.compared}
    assert canonical.digest == hashlib.sha256(canonical_json(wrapper)).hexdigest()


_SURFACE_PATHS = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/model/m/invoke",
    "/model/m/converse",
    "/v1/projects/p/locations/l/publishers/anthropic/models/c:rawPredict",
    "/v1beta/models/g:streamGenerateContent",
]
_paths = st.one_of(
    st.sampled_from(_SURFACE_PATHS),
    st.text(max_size=40).map(lambda text: "/" + text),
)


@settings(max_examples=300, deadline=None, database=None)
@given(
    method=st.sampled_from(["POST", "GET", "post", "DELETE", ""]),
    path=_paths,
    query=st.text(max_size=20),
    headers=st.dictionaries(st.sampled_from(["anthropic-beta", "x-other"]), st.text(max_size=10)),
    body=st.binary(max_size=200),
)
def test_canonicalize_never_raises_on_arbitrary_requests(
    method: str, path: str, query: str, headers: dict[str, str], body: bytes
) -> None:
    canonical = canonicalize(RequestParts(method, f"https://h{path}?{query}", headers, body))
    assert len(canonical.digest) == 64


_json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
_SURFACE_BODIES = [
    ("/v1/chat/completions", "messages"),
    ("/v1/responses", "input"),
    ("/v1/messages", "messages"),
    ("/v1beta/models/g:generateContent", "contents"),
    ("/model/m/converse", "messages"),
    ("/v1/other", "payload"),
]


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


@settings(max_examples=200, deadline=None, database=None)
@given(
    route=st.sampled_from(_SURFACE_BODIES),
    content=_json.filter(lambda value: value is not None),
    extra=st.dictionaries(st.text(max_size=6), _json, max_size=5),
    rng=st.randoms(use_true_random=False),
)
def test_key_order_and_separators_never_change_the_digest(
    route: tuple[str, str], content: Any, extra: dict[str, Any], rng: random.Random
) -> None:
    path, required = route
    body = {**extra, required: content}
    url = "https://h" + path
    original = canonicalize(post(url, body))
    shuffled = canonicalize(post(url, _shuffled(body, rng), separators=(", ", ": ")))
    assert shuffled.digest == original.digest
    assert shuffled.surface == original.surface


def test_a_repeated_request_with_another_beta_header_is_fingerprinted_anew() -> None:
    # Repeated requests reuse their canonical form; the header a canonicalizer reads is part of
    # what makes two requests the same.
    url = "https://api.anthropic.com/v1/messages"
    body = json.dumps({**CHAT, "max_tokens": 10}).encode()
    plain = canonicalize(RequestParts("POST", url, {}, body))
    beta = canonicalize(RequestParts("POST", url, {"anthropic-beta": "files-2025"}, body))
    assert plain.surface == "anthropic.messages"
    assert beta.surface == "anthropic.beta.messages"
    assert beta.compared["betas"] == ["files-2025"]
    assert canonicalize(RequestParts("POST", url, {}, body)) == plain
    assert plain.digest != beta.digest


def test_a_large_body_is_fingerprinted_the_same_each_time() -> None:
    url = "https://api.openai.com/v1/chat/completions"
    body = json.dumps({"messages": [{"role": "user", "content": "hello world " * 9_000}]}).encode()
    first = canonicalize(RequestParts("POST", url, {}, body))
    assert canonicalize(RequestParts("POST", url, {}, body)) == first
    assert first.compared["messages"][0]["content"] == "hello world " * 9_000
