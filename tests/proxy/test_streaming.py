"""Streams pass through frame by frame while teed; what is recorded and what is not."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import SSE_HEADERS, chat_chunks, chat_json
from tests.fakes.server import Script, Server
from tests.proxy.support import routes_to, running, shared

CHAT = b'{"model":"m","messages":[{"role":"user","content":"stream please"}],"stream":true}'


def http() -> httpx.Client:
    return shared(httpx.Client, timeout=10)


def post_chat(client: httpx.Client, proxy, body: bytes = CHAT, **kw):
    return client.stream(
        "POST",
        proxy.base_url("openai") + "/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json", "authorization": "Bearer sk-x"},
        **kw,
    )


def stored(store):
    with Store(store) as opened:
        exchanges = Exchanges(opened)
        return [
            (record, exchanges.body(record, exchanges.get(key)[1]))
            for key, record in exchanges.scan()
        ]


def test_the_first_frame_reaches_the_client_while_the_provider_still_streams(store):
    gate = threading.Event()
    frames = chat_chunks(["Hel", "lo"])
    script = Script(headers=SSE_HEADERS, frames=frames, chunked=True, gate=gate)
    with (
        Server(lambda seen: script) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
        post_chat(http(), proxy) as response,
    ):
        chunks = response.iter_raw()
        first = next(chunks)  # arrives although the provider holds back the rest
        assert first == frames[0]
        assert not stored(store)  # nothing is recorded before the terminal frame
        gate.set()
        rest = b"".join(chunks)
    assert first + rest == b"".join(frames)
    [(record, body)] = stored(store)
    assert body == b"".join(frames) and record.streamed


def test_a_client_hanging_up_mid_stream_leaves_no_record_and_cancels_upstream(store):
    gate = threading.Event()
    script = Script(headers=SSE_HEADERS, frames=chat_chunks(["a", "b"]), chunked=True, gate=gate)
    with (
        Server(lambda seen: script) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
    ):
        with post_chat(http(), proxy) as response:
            next(response.iter_raw())
        # the client is gone; the proxy must close the upstream request on its own
        deadline = time.monotonic() + 5
        while upstream.cancelled == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        gate.set()
    assert upstream.cancelled == 1
    assert stored(store) == []


def test_one_slow_stream_does_not_stall_other_clients(store):
    gate = threading.Event()

    def reply(seen):
        if b"slow" in seen.body:
            return Script(
                headers=SSE_HEADERS, frames=chat_chunks(["x", "y"]), chunked=True, gate=gate
            )
        return Script(frames=[chat_json("fast")])

    with (
        Server(reply) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
        post_chat(http(), proxy, CHAT.replace(b"stream please", b"slow")) as slow,
    ):
        chunks = slow.iter_raw()
        next(chunks)
        started = time.perf_counter()
        for n in range(5):
            body = b'{"model":"m","messages":[{"role":"user","content":"%d"}]}' % n
            fast = http().post(proxy.base_url("openai") + "/v1/chat/completions", content=body)
            assert fast.json()["choices"][0]["message"]["content"] == "fast"
        elapsed = time.perf_counter() - started
        gate.set()
        b"".join(chunks)
    assert elapsed < 3
    assert len(stored(store)) == 6


def test_an_unfinished_stream_is_forwarded_but_not_recorded(store):
    script = Script(headers=SSE_HEADERS, frames=chat_chunks(["cut"], done=False)[:1], chunked=True)
    with (
        Server(lambda seen: script) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
        post_chat(http(), proxy) as response,
    ):
        assert response.read() == script.frames[0]
    assert stored(store) == []


def test_an_unreachable_upstream_is_a_502_naming_it(store):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with running(store, "record", routes=routes_to(url)) as proxy:
        reply = http().post(proxy.base_url("openai") + "/v1/chat/completions", content=CHAT)
    assert reply.status_code == 502
    error = reply.json()["error"]
    assert error["type"] == "pyrula_upstream_error" and url in error["message"]


@pytest.mark.parametrize("mode", ["auto", "replay"])
def test_a_streamed_replay_is_chunked_and_byte_identical(store, mode):
    frames = chat_chunks(["one", " two"])
    script = Script(headers=SSE_HEADERS, frames=frames, chunked=True)
    with Server(lambda seen: script) as upstream:
        routes = routes_to(upstream.url)
        with running(store, "record", routes=routes) as proxy, post_chat(http(), proxy) as live:
            recorded = live.read()
        with running(store, mode, routes=routes) as proxy, post_chat(http(), proxy) as response:
            replayed = response.read()
            assert response.headers.get("transfer-encoding") == "chunked"
            assert response.headers["content-type"] == "text/event-stream"
    assert recorded == replayed == b"".join(frames)
    assert upstream.count() == 1
