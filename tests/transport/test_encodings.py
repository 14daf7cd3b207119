"""Compressed replies in every coding the HTTP stack decodes (gzip, deflate, br, zstd): recorded
decoded (so the scrubber sees into them and a store replays where no decoder is installed), a
stream's terminal frame found as it flows."""

from __future__ import annotations

import gzip
import zlib

import pytest

import pyrula
from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import chat_chunks, chat_json, openai_client
from tests.fakes.provider import OPENAI_LIB, TEST_KEY, Upstream, ask


def _compressor(coding: str):
    asked = OPENAI_LIB.Client().headers.get("accept-encoding", "")
    if coding not in asked:  # httpx2 asks for (and reads) no zstd; a provider would not send it
        pytest.skip(f"this HTTP stack does not ask for {coding}")
    if coding == "gzip":
        return gzip.compress
    if coding == "deflate":
        return zlib.compress
    if coding == "br":
        return pytest.importorskip("brotli").compress
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor().compress


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_a_compressed_stream_is_recorded_decoded_scrubbed_and_replays(store_path, coding):
    compress = _compressor(coding)
    frames = chat_chunks([f"echo {TEST_KEY}", " done"])
    body = compress(b"".join(frames))
    headers = {"content-type": "text/event-stream", "content-encoding": coding}
    upstream = Upstream(OPENAI_LIB, lambda request: (200, headers, [body[:7], body[7:]]))
    client = openai_client(upstream, api_key=TEST_KEY, max_retries=0)

    def read() -> str:
        stream = client.chat.completions.create(model="m", messages=ask("s"), stream=True)
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with pyrula.cassette("coded", store=store_path):
        live = read()
    with pyrula.cassette("coded", "none", store=store_path):
        replayed = read()
    assert replayed == live.replace(TEST_KEY, "[scrubbed]")
    assert len(upstream.calls) == 1
    with Store(store_path) as store:
        exchanges = Exchanges(store)
        ((_key, record),) = exchanges.scan()
        found = exchanges.get(_key)
        assert found is not None
        stored = exchanges.body(*found)
    assert "content-encoding" not in {k.lower() for k, _ in record.headers}
    assert stored.startswith(b"data: ") and TEST_KEY.encode() not in stored


@pytest.mark.parametrize("value", ["café ☕".encode(), "Zürich".encode("latin-1")])
def test_a_reply_header_that_is_not_ascii_is_recorded_and_replayed(store_path, value):
    # Providers and proxies in front of them may send a header value in UTF-8 (or Latin-1):
    # the SDK must read the same value live and replayed, and recording must not fail on it.
    headers = {"content-type": "application/json", "x-note": value}
    upstream = Upstream(OPENAI_LIB, lambda request: (200, headers, [chat_json("hi")]))
    client = openai_client(upstream, api_key=TEST_KEY, max_retries=0)

    def read() -> tuple[str, str | None]:
        raw = client.chat.completions.with_raw_response.create(model="m", messages=ask("s"))
        return raw.parse().choices[0].message.content, raw.headers.get("x-note")

    with pyrula.cassette("header", store=store_path):
        live = read()
    with pyrula.cassette("header", "none", store=store_path):
        replayed = read()
    assert live[0] == "hi" and live[1] is not None and live[1] != ""
    assert replayed == live
    assert len(upstream.calls) == 1
