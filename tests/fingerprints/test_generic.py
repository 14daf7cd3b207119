from __future__ import annotations

from typing import Any

import pytest
from pyrula.fingerprints import RequestParts, canonicalize

from tests.fingerprints.support import (
    VOLATILE_HEADERS,
    assert_no_secret,
    digest,
    image_b64,
    post,
    reordered,
)

URL = "https://api.example.com/v1/embeddings"
BODY = {"model": "text-embedding-3-small", "input": ["a", "b"]}


def _request(method: str, url: str, body: bytes = b"") -> RequestParts:
    return RequestParts(method, url, {}, body)


def test_a_json_body_is_compared_parsed_with_the_path_and_method() -> None:
    canonical = canonicalize(post(URL + "?b=2&a=1", BODY))
    assert canonical.surface == "generic"
    assert canonical.compared == {
        "method": "POST",
        "path": "/v1/embeddings",
        "query": [["a", "1"], ["b", "2"]],
        "body": BODY,
    }
    assert canonical.meta == {"host": "api.example.com"}


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(post(URL, reordered(BODY)), id="key order"),
        pytest.param(post(URL, BODY, separators=(", ", ": ")), id="separators"),
        pytest.param(post(URL, BODY, VOLATILE_HEADERS), id="headers"),
        pytest.param(post("http://127.0.0.1:8080/v1/embeddings", BODY), id="host"),
        pytest.param(post("https://user:pw@api.example.com/v1/embeddings", BODY), id="userinfo"),
        pytest.param(post(URL + "?key=s1&api-key=s2&Signature=s3", BODY), id="secret query"),
    ],
)
def test_wire_details_hosts_and_secrets_do_not_change_the_digest(variant: RequestParts) -> None:
    assert digest(variant) == digest(post(URL, BODY))


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(_request("PUT", URL, post(URL, BODY).body), id="method"),
        pytest.param(post(URL.replace("embeddings", "moderations"), BODY), id="path"),
        pytest.param(post(URL + "?dimensions=8", BODY), id="query"),
        pytest.param(post(URL, {**BODY, "input": ["a"]}), id="body"),
        pytest.param(post(URL, {**BODY, "n": 1.5}), id="number"),
    ],
)
def test_method_path_query_and_body_change_the_digest(variant: RequestParts) -> None:
    assert digest(variant) != digest(post(URL, BODY))


def test_query_order_does_not_matter_but_repeated_values_do() -> None:
    assert digest(_request("GET", URL + "?a=1&b=2")) == digest(_request("GET", URL + "?b=2&a=1"))
    assert digest(_request("GET", URL + "?a=1&a=2")) != digest(_request("GET", URL + "?a=1"))


def test_a_non_json_body_is_compared_by_digest() -> None:
    upload = _request("POST", "https://api.example.com/v1/files", b"\x89PNG\r\n\x1a\n" * 100)
    canonical = canonicalize(upload)
    assert canonical.compared["body"]["$digest"].startswith("sha256:")
    assert canonical.compared["body"]["$bytes"] == "800"
    changed = _request("POST", upload.url, upload.body + b"!")
    assert digest(changed) != canonical.digest


def test_an_empty_body_adds_no_body_field() -> None:
    canonical = canonicalize(_request("GET", "https://api.example.com/v1/models"))
    assert canonical.compared == {"method": "GET", "path": "/v1/models"}


def test_a_json_null_body_differs_from_no_body() -> None:
    assert digest(_request("POST", URL, b"null")) != digest(_request("POST", URL))


def test_secrets_in_query_and_body_are_neither_compared_nor_stored() -> None:
    body: dict[str, Any] = {
        "grant_type": "refresh",
        "refresh_token": "rt-secret",
        "nested": {"client_secret": "cs-secret"},
    }
    canonical = canonicalize(post(URL + "?access_token=at-secret&X-Amz-Signature=sig-secret", body))
    assert_no_secret(canonical, "rt-secret", "cs-secret", "at-secret", "sig-secret")
    rotated = {
        "grant_type": "refresh",
        "refresh_token": "rt-new",
        "nested": {"client_secret": "cs-new"},
    }
    assert digest(post(URL, rotated)) == canonical.digest


def test_binary_inside_a_json_body_is_a_digest() -> None:
    canonical = canonicalize(post(URL, {"image": image_b64(1)}))
    assert canonical.compared["body"]["image"]["$digest"].startswith("sha256:")
    assert_no_secret(canonical, image_b64(1)[:100])
