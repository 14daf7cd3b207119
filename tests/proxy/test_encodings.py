"""A compressed reply through the proxy: live and replayed, a client sees the same headers and
body (decoded, its length recomputed, no Content-Encoding), as the in-process transports give
the SDK. Tested with the real OpenAI SDK, in every coding the stack can decode here."""

from __future__ import annotations

import importlib.util

import openai
import pytest

from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import SSE_HEADERS, chat_chunks, chat_json
from tests.fakes.server import Script, Server
from tests.proxy.support import routes_to, running

CODINGS = [
    pytest.param("gzip"),
    pytest.param(
        "br",
        marks=pytest.mark.skipif(not importlib.util.find_spec("brotli"), reason="no brotli"),
    ),
    pytest.param(
        "zstd",
        marks=pytest.mark.skipif(not importlib.util.find_spec("zstandard"), reason="no zstd"),
    ),
]
ASK = {"model": "m", "messages": [{"role": "user", "content": "zip it"}]}


def _client(proxy) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-x", base_url=proxy.base_url("openai") + "/v1", max_retries=0)


def _seen(raw) -> tuple[dict[str, str], bytes]:
    """The headers an SDK user can read (the proxy's own `x-pyrula-*` aside), and the body."""
    kept = {k: v for k, v in raw.headers.items() if not k.startswith("x-pyrula")}
    return kept, raw.http_response.read()


def _stored(store) -> list[bytes]:
    with Store(store) as opened:
        exchanges = Exchanges(opened)
        found = [exchanges.get(key) for key, _record in exchanges.scan()]
        return [exchanges.body(record, page) for record, page in filter(None, found)]


@pytest.mark.parametrize("coding", CODINGS)
def test_a_compressed_plain_reply_looks_the_same_live_and_replayed(store, coding):
    script = Script(frames=[chat_json("zipped " * 50)], compress=coding)
    with Server(lambda seen: script) as upstream:
        with running(store, "record", routes=routes_to(upstream.url)) as proxy, _client(proxy) as c:
            live = _seen(c.chat.completions.with_raw_response.create(**ASK))
        with running(store, "replay", routes=routes_to(upstream.url)) as proxy, _client(proxy) as c:
            replayed = _seen(c.chat.completions.with_raw_response.create(**ASK))
    assert upstream.count() == 1
    assert "content-encoding" not in live[0]
    assert live[0]["content-length"] == str(len(chat_json("zipped " * 50)))
    assert live == replayed
    assert _stored(store) == [chat_json("zipped " * 50)]


@pytest.mark.parametrize("coding", CODINGS)
def test_a_compressed_stream_looks_the_same_live_and_replayed(store, coding):
    frames = chat_chunks(["one ", "two ", "three"])
    script = Script(headers=SSE_HEADERS, frames=frames, chunked=True, compress=coding)
    ask = {**ASK, "stream": True}
    outcomes = []
    with Server(lambda seen: script) as upstream:
        for mode in ("record", "replay"):
            with running(store, mode, routes=routes_to(upstream.url)) as proxy, _client(proxy) as c:
                raw = c.chat.completions.with_raw_response.create(**ask)
                headers = {k: v for k, v in raw.headers.items() if not k.startswith("x-pyrula")}
                texts = [c.choices[0].delta.content for c in raw.parse() if c.choices]
                outcomes.append((headers, texts))
    assert upstream.count() == 1
    assert "content-encoding" not in outcomes[0][0]
    assert "content-length" not in outcomes[0][0]
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1][:3] == ["one ", "two ", "three"]
