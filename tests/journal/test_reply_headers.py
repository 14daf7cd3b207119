"""Reply headers an SDK exposes replay the same: google-genai copies them into
`sdk_http_response.headers`, so a replayed reply's `model_dump()` must equal the live one's."""

from __future__ import annotations

import json

import google.genai

import pyrula
from tests.fakes import gemini_api
from tests.fakes.provider import GENAI_LIB, TEST_KEY, journal_transport


def _with_length(request):
    body = json.dumps(gemini_api.response("Pong.")).encode()
    headers = {
        "content-type": "application/json; charset=UTF-8",
        "content-length": str(len(body)),
        "server-timing": "gfet4t7; dur=512",
    }
    return 200, headers, [body]


def test_a_gemini_reply_dumps_the_same_live_and_replayed(store_path):
    stub = gemini_api.upstream(_with_length)
    transport = journal_transport(GENAI_LIB, stub.transport())
    client = google.genai.Client(
        api_key=TEST_KEY,
        http_options={"base_url": gemini_api.BASE_URL, "client_args": {"transport": transport}},
    )

    def ask():
        return client.models.generate_content(model=gemini_api.MODEL, contents="Ping?")

    with pyrula.cassette("gemini-headers", "once", store=store_path):
        live = ask()
    with pyrula.cassette("gemini-headers", "none", store=store_path):
        replayed = ask()
    assert live.sdk_http_response is not None
    assert "content-length" in live.sdk_http_response.headers
    assert replayed.model_dump() == live.model_dump()
    assert len(stub.calls) == 1


def _gzipped(request):
    import gzip

    body = gzip.compress(json.dumps(gemini_api.response("Pong, zipped.")).encode())
    headers = {
        "content-type": "application/json; charset=UTF-8",
        "content-encoding": "gzip",
        "content-length": str(len(body)),
        "vary": "Origin",
    }
    return 200, headers, [body]


def test_a_gzip_gemini_reply_shows_the_sdk_the_same_headers_live_and_replayed(store_path):
    stub = gemini_api.upstream(_gzipped)
    transport = journal_transport(GENAI_LIB, stub.transport())
    client = google.genai.Client(
        api_key=TEST_KEY,
        http_options={"base_url": gemini_api.BASE_URL, "client_args": {"transport": transport}},
    )

    def ask():
        return client.models.generate_content(model=gemini_api.MODEL, contents="Ping?")

    with pyrula.cassette("gemini-gzip", "once", store=store_path):
        live = ask()
    with pyrula.cassette("gemini-gzip", "none", store=store_path):
        replayed = ask()
    assert live.text == replayed.text == "Pong, zipped."
    assert replayed.model_dump() == live.model_dump()
    assert replayed.sdk_http_response.headers["vary"] == "Origin"
    assert len(stub.calls) == 1
