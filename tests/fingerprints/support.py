"""Builders shared by the fingerprint tests: requests shaped the way the real SDKs send them."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from pyrula.fingerprints import Canonical, RequestParts, canonical_json, canonicalize

from tests.fakes.anthropic_api import BASE_URL as ANTHROPIC_URL
from tests.fakes.openai_api import BASE_URL as OPENAI_URL
from tests.fakes.provider import ANTHROPIC_LIB, Upstream, json_reply

# What every openai/anthropic call carries and must never matter (see SDK-FACTS.md).
VOLATILE_HEADERS = {
    "x-stainless-retry-count": "3",
    "x-stainless-read-timeout": "12",
    "x-stainless-package-version": "9.9.9",
    "user-agent": "SomethingElse/1.0",
    "authorization": "Bearer sk-other",
    "x-api-key": "sk-ant-other",
    "x-goog-api-key": "AIza-other",
    "content-length": "99999",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "anthropic-version": "2023-06-01",
    "amz-sdk-invocation-id": "1f2e3d",
    "x-amz-date": "20261130T000000Z",
    "x-amz-security-token": "FwoGZXIvYXdzE-other",
}


def post(
    url: str,
    body: Any,
    headers: dict[str, str] | None = None,
    *,
    separators: tuple[str, str] = (",", ":"),
) -> RequestParts:
    raw = body if isinstance(body, bytes) else json.dumps(body, separators=separators).encode()
    return RequestParts("POST", url, {k.lower(): v for k, v in (headers or {}).items()}, raw)


def with_headers(parts: RequestParts, extra: dict[str, str]) -> RequestParts:
    return RequestParts(parts.method, parts.url, {**parts.headers, **extra}, parts.body)


def reordered(value: Any) -> Any:
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(v) for v in value]
    return value


def image_b64(seed: int, size: int = 600) -> str:
    return base64.b64encode(bytes((seed + i) % 256 for i in range(size))).decode()


def assert_no_secret(canonical: Canonical, *secrets: str) -> None:
    stored = canonical_json(canonical.compared) + canonical_json(canonical.meta)
    for secret in secrets:
        assert secret.encode() not in stored, secret


def digest(parts: RequestParts) -> str:
    return canonicalize(parts).digest


def digest_after(url: str, base: dict[str, Any], mutate: Callable[[dict[str, Any]], Any]) -> str:
    """The digest of `base` posted to `url` after `mutate` changed a copy of it."""
    body = copy.deepcopy(base)
    mutate(body)
    return digest(post(url, body))


def capture(call: Callable[[Any], object], lib: Any = httpx2) -> RequestParts:
    """The one request an SDK call sends, answered with a 400 so no reply needs faking.

    `lib` is the HTTP stack the SDK is built on (anthropic 0.x takes only httpx clients).
    """
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "test"}}
    upstream = Upstream(lib, lambda request: json_reply(error, 400))
    with (
        upstream.http_client() as http,
        pytest.raises((openai.BadRequestError, anthropic.BadRequestError)),
    ):
        call(http)
    assert len(upstream.requests) == 1
    request = upstream.requests[0]
    headers = {k.lower(): v for k, v in request.headers.items()}
    return RequestParts(request.method, str(request.url), headers, request.content)


def openai_client(http: httpx2.Client) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test-secret", base_url=OPENAI_URL, http_client=http)


def capture_anthropic(call: Callable[[Any], object]) -> RequestParts:
    return capture(call, ANTHROPIC_LIB)


def anthropic_client(http: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="sk-ant-test-secret", base_url=ANTHROPIC_URL, http_client=http
    )
