"""The record cap's one rule through the proxy: a reply over the cap is not recorded and the
client gets an error its SDK does not retry (in-process, the caller gets `PayloadTooLarge`)."""

from __future__ import annotations

import logging

import httpx
import openai
import pytest

import pyrula
from pyrula.errors import PayloadTooLarge
from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import SSE_HEADERS, chat_chunks, chat_json, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream
from tests.fakes.server import Script, Server
from tests.proxy.support import routes_to, running

BIG = "word " * 4000  # about 20 kB of reply, over the 10 kB cap below


def _stored(store):
    with Store(store) as opened:
        return list(Exchanges(opened).scan())


@pytest.mark.parametrize("chunked", [False, True], ids=["counted", "chunked"])
def test_an_over_cap_plain_reply_is_an_error_the_sdk_does_not_retry(
    store, monkeypatch, caplog, chunked
):
    monkeypatch.setenv("PYRULA_MAX_RECORD_BYTES", "10000")
    caplog.set_level(logging.INFO, logger="pyrula.proxy")
    script = Script(frames=[chat_json(BIG)], chunked=chunked)
    with (
        Server(lambda seen: script) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
    ):
        client = openai.OpenAI(
            api_key="sk-x", base_url=proxy.base_url("openai") + "/v1", max_retries=2
        )
        with client, pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    error = caught.value
    assert error.status_code == 502
    assert error.response.headers["x-pyrula-error"] == "payload_too_large"
    assert "PayloadTooLarge" in error.response.headers["x-pyrula-not-recorded"]
    assert "PYRULA_MAX_EVENT_PAYLOAD_BYTES" in error.message
    assert upstream.count() == 1  # the paid request went out once
    assert _stored(store) == []
    assert "per-record cap" in caplog.text  # the exchange's log line says why


def test_an_over_cap_stream_is_cut_short_and_not_recorded(store, monkeypatch):
    monkeypatch.setenv("PYRULA_MAX_RECORD_BYTES", "10000")
    big = [b"data: " + b"x" * 4000 + b"\n\n" for _ in range(5)] + [b"data: [DONE]\n\n"]
    script = Script(headers=SSE_HEADERS, frames=big, chunked=True)
    with (
        Server(lambda seen: script) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
        httpx.Client(timeout=10) as http,
        http.stream("POST", proxy.base_url("openai") + "/v1/chat/completions", content=b"{}") as r,
        pytest.raises(httpx.RemoteProtocolError),  # as an in-process stream raises as it is read
    ):
        r.read()
    assert upstream.count() == 1
    assert _stored(store) == []


def test_passthrough_forwards_a_reply_of_any_size(store, monkeypatch):
    monkeypatch.setenv("PYRULA_MAX_RECORD_BYTES", "10000")
    script = Script(frames=[chat_json(BIG)])
    with (
        Server(lambda seen: script) as upstream,
        running(store, "passthrough", routes=routes_to(upstream.url)) as proxy,
    ):
        reply = httpx.post(proxy.base_url("openai") + "/v1/chat/completions", content=b"{}")
    assert reply.status_code == 200 and reply.content == chat_json(BIG)


def _read_until_refused(stream) -> tuple[list[str], BaseException | None]:
    texts: list[str] = []
    try:
        for chunk in stream:
            texts.extend(c.delta.content for c in chunk.choices if c.delta.content)
    except Exception as exc:  # whatever the path raises: compared below
        return texts, exc
    return texts, None


def test_an_over_cap_stream_stops_at_the_same_event_in_process_and_through_the_proxy(
    store, tmp_path, monkeypatch
):
    # Events of about 4 kB against a 10 kB cap: the third takes the reply over it.
    words = [f"{n}" * 4000 for n in range(5)]
    frames = chat_chunks(words)
    ask = {"model": "m", "messages": [{"role": "user", "content": "long"}], "stream": True}

    upstream = Upstream(OPENAI_LIB, lambda r: (200, SSE_HEADERS, frames))
    in_process = openai_client(upstream, max_retries=0)
    with Store(tmp_path / "in-process", max_record_bytes=10_000) as capped:
        with pytest.raises(PayloadTooLarge), pyrula.cassette("cap", store=capped):
            seen, error = _read_until_refused(in_process.chat.completions.create(**ask))
            assert isinstance(error, PayloadTooLarge)
            raise error
        assert list(Exchanges(capped).scan()) == []

    monkeypatch.setenv("PYRULA_MAX_RECORD_BYTES", "10000")
    script = Script(headers=SSE_HEADERS, frames=frames, chunked=True, pause_s=0.1)
    with (
        Server(lambda seen: script) as server,
        running(store, "record", routes=routes_to(server.url)) as proxy,
    ):
        client = openai.OpenAI(
            api_key="sk-x", base_url=proxy.base_url("openai") + "/v1", max_retries=0
        )
        relayed, cut = _read_until_refused(client.chat.completions.create(**ask))
    assert cut is not None  # the stream was cut short, not ended
    assert seen == relayed == words[:2]  # the same events, then the error, on both paths
    assert _stored(store) == []
