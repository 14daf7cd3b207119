"""The HTTP front end: keep-alive, limits, malformed input, authentication, and a fuzz run."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyrula.proxy import Limits

from tests.fakes.openai_api import chat_json
from tests.fakes.server import Script, Server
from tests.proxy.support import raw_exchange, routes_to, running, status_of

TOKEN = "t0ken-for-the-proxy-1234567890"
CHAT = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


HEALTH = b"GET /_pyrula/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def statuses(reply: bytes) -> list[int]:
    return [int(s) for s in re.findall(rb"HTTP/1\.1 (\d{3}) ", reply)]


def chat_request(path: bytes = b"/openai/v1/chat/completions", extra: bytes = b"") -> bytes:
    return (
        b"POST "
        + path
        + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(CHAT)
        + CHAT
    )


@pytest.fixture(scope="module")
def upstream():
    with Server(lambda seen: Script(frames=[chat_json("ok")])) as server:
        yield server


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, upstream):
    """A store holding one recorded chat exchange."""
    store = tmp_path_factory.mktemp("http") / "store"
    with running(store, "record", routes=routes_to(upstream.url)) as proxy:
        assert (
            httpx.post(proxy.base_url("openai") + "/v1/chat/completions", content=CHAT).status_code
            == 200
        )
    return store


@pytest.fixture(scope="module")
def replaying(recorded, upstream):
    limits = Limits(max_body_bytes=4096, max_header_bytes=2048, request_timeout_s=2, grace_s=1)
    with running(recorded, "replay", routes=routes_to(upstream.url), limits=limits) as proxy:
        yield proxy


# -- the wire ---------------------------------------------------------------------------------


def test_keep_alive_serves_many_requests_on_one_connection(replaying):
    connection = http.client.HTTPConnection("127.0.0.1", replaying.port, timeout=5)
    statuses, bodies = [], []
    for _ in range(3):
        connection.request("POST", "/_pyrula/reset")
        connection.getresponse().read()
        sock = connection.sock
        connection.request("POST", "/openai/v1/chat/completions", body=CHAT)
        reply = connection.getresponse()
        statuses.append(reply.status)
        bodies.append(reply.read())
        assert connection.sock is sock  # the same connection carried every request
    connection.close()
    assert statuses == [200, 200, 200]
    assert bodies == [chat_json("ok")] * 3


def test_pipelined_requests_are_answered_in_order(replaying):
    health = b"GET /_pyrula/health HTTP/1.1\r\nHost: x\r\n\r\n"
    reply = raw_exchange(
        replaying.port, health + b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n" + health
    )
    assert statuses(reply) == [200, 404, 200]


def test_an_http_1_0_request_is_answered_and_closed(replaying):
    reply = raw_exchange(replaying.port, b"GET /_pyrula/health HTTP/1.0\r\n\r\n", half_close=False)
    assert reply.startswith(b"HTTP/1.1 200") and b'"status":"ok"' in reply


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 4000 + b"\r\n\r\n", 431),
        (b"POST /openai/v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", 400),
        (b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com\r\n\r\n", 400),
    ],
)
def test_malformed_or_oversized_requests_get_a_4xx(replaying, data, status):
    reply = raw_exchange(replaying.port, data)
    assert status_of(reply) == status
    body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["type"].startswith("pyrula_")


def test_a_chunked_body_over_the_limit_is_refused(replaying):
    chunk = b"x" * 3000
    data = b"POST /openai/v1/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    data += (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 2 + b"0\r\n\r\n"
    assert status_of(raw_exchange(replaying.port, data)) == 413


def test_expect_100_continue_gets_a_continue_before_the_answer(replaying):
    head = (
        b"POST /openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        b"Content-Length: %d\r\n\r\n" % len(CHAT)
    )
    with socket.create_connection(("127.0.0.1", replaying.port), timeout=5) as sock:
        sock.sendall(head)
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 ")
        sock.sendall(CHAT)
        answer = sock.recv(65536)
    assert status_of(answer) in (200, 409)


def test_an_unknown_path_is_a_404_naming_the_routes(replaying):
    reply = httpx.get(replaying.url + "/nowhere/v1/models")
    assert reply.status_code == 404
    assert "/openai/" in reply.json()["error"]["message"]


def test_many_concurrent_connections_are_served(replaying):
    results: list[int] = []

    def one():
        results.extend(statuses(raw_exchange(replaying.port, HEALTH, half_close=False)))

    threads = [threading.Thread(target=one) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert results == [200] * 64


def test_a_token_is_required_when_set_and_never_forwarded(store, upstream):
    with running(store, "record", routes=routes_to(upstream.url), token=TOKEN) as proxy:
        url = proxy.base_url("openai") + "/v1/chat/completions"
        refused = httpx.post(url, content=CHAT)
        wrong = httpx.post(url, content=CHAT, headers={"proxy-authorization": "Bearer nope"})
        bearer = httpx.post(url, content=CHAT, headers={"proxy-authorization": f"Bearer {TOKEN}"})
        header = httpx.post(url, content=CHAT, headers={"x-pyrula-token": TOKEN})
    assert refused.status_code == wrong.status_code == 401
    assert refused.json()["error"]["type"] == "pyrula_unauthorized"
    assert bearer.status_code == header.status_code == 200
    forwarded = upstream.seen[-1].headers
    assert "x-pyrula-token" not in forwarded and "proxy-authorization" not in forwarded


# -- fuzzing ----------------------------------------------------------------------------------

_VALID = [
    b"POST /openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    b"GET /anthropic/v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHost: x\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
]
_NASTY = [
    b"\r\n",
    b"\n",
    b"\x00",
    b":",
    b" ",
    b"\xff",
    b"Content-Length: -1\r\n",
    b"0\r\n\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"HTTP/9.9",
    b"\r\n\r\n",
    b"Content-Length: 1\r\n" * 2,
]


@st.composite
def malformed(draw) -> bytes:
    base = bytearray(draw(st.sampled_from(_VALID)))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(base)))
        action = draw(st.sampled_from(["insert", "delete", "flip", "truncate"]))
        if action == "insert":
            base[position:position] = draw(
                st.sampled_from(_NASTY) | st.binary(min_size=1, max_size=8)
            )
        elif action == "delete":
            del base[position : position + draw(st.integers(1, 6))]
        elif action == "flip" and position < len(base):
            base[position] = draw(st.integers(0, 255))
        else:
            del base[position:]
    return bytes(base)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=malformed() | st.binary(max_size=300))
def test_fuzzed_requests_get_a_4xx_or_a_close_and_the_server_keeps_serving(replaying, data):
    reply = raw_exchange(replaying.port, data, timeout=5)
    for status in statuses(reply):
        # a mutation can still be a valid request: it is then answered (a hit, a miss, a route)
        assert 400 <= status < 500 or status == 200, reply[:300]
    assert statuses(raw_exchange(replaying.port, HEALTH)) == [200]


def test_a_slow_client_cannot_hold_a_request_open_forever(replaying):
    with socket.create_connection(("127.0.0.1", replaying.port), timeout=10) as sock:
        sock.sendall(
            b"POST /openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"
        )
        started = time.monotonic()
        answer = sock.recv(65536)
    assert status_of(answer) == 408
    assert time.monotonic() - started < 5
