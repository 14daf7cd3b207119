"""Hostile clients cannot make an authorised one wait: the token is checked on the request head
(before a slot, the body or the upstream), slow heads time out, and connections whose head has
not arrived are capped apart, the oldest closed first."""

from __future__ import annotations

import socket
from contextlib import ExitStack

import httpx
import pytest
from pyrula.proxy import Limits

from tests.fakes.openai_api import chat_json
from tests.fakes.server import Script, Server
from tests.proxy.support import raw_exchange, routes_to, running, status_of

TOKEN = "proxy-token-0123456789abcdef"
AUTH = {"proxy-authorization": f"Bearer {TOKEN}"}
PARTIAL = b"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: proxy\r\ncontent-type: applic"


def _half_sent(port: int, stack: ExitStack) -> socket.socket:
    sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=30))
    sock.sendall(PARTIAL)
    return sock


def _still_open(sock: socket.socket) -> bool:
    """Whether the proxy has neither answered nor closed this connection (it has sent nothing)."""
    sock.setblocking(False)
    try:
        return not sock.recv(1)  # b"" would mean closed: not open
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(30)
    try:
        return sock.recv(65536) == b""
    except OSError:
        return True


def test_half_sent_unauthenticated_heads_do_not_delay_an_authorised_request(store):
    # Four serving slots and forty connections that never finish their head: before the fix
    # they held every slot, and the authorised request waited for them to time out.
    limits = Limits(max_connections=4, max_pending_connections=64, head_timeout_s=120, grace_s=1)
    script = Script(frames=[chat_json("served")])
    with (
        Server(lambda seen: script) as upstream,
        running(
            store,
            "record",
            routes=routes_to(upstream.url),
            token=TOKEN,
            allow_remote=True,
            limits=limits,
        ) as proxy,
        ExitStack() as stack,
    ):
        slow = [_half_sent(proxy.port, stack) for _ in range(40)]
        reply = httpx.post(
            proxy.base_url("openai") + "/v1/chat/completions",
            content=b'{"model":"m","messages":[]}',
            headers=AUTH,
            timeout=60,
        )
        # Ordering, not timing: the authorised reply is whole while every slow head is still
        # open (none timed out, none answered).
        assert reply.status_code == 200 and reply.content == chat_json("served")
        assert all(_still_open(sock) for sock in slow)
    assert upstream.count() == 1


def test_past_the_pending_cap_the_oldest_unfinished_heads_are_closed(store):
    limits = Limits(max_connections=4, max_pending_connections=8, head_timeout_s=120, grace_s=1)
    with (
        running(store, "passthrough", token=TOKEN, limits=limits) as proxy,
        ExitStack() as stack,
    ):
        slow = [_half_sent(proxy.port, stack) for _ in range(8)]
        newer = [_half_sent(proxy.port, stack) for _ in range(8)]
        assert all(_closed(sock) for sock in slow)  # each newcomer closed the oldest
        health = httpx.get(proxy.url + "/_pyrula/health", headers=AUTH, timeout=60)
        assert health.status_code == 200
        assert sum(_still_open(sock) for sock in newer) >= 7  # the health check took one place


def test_a_wrong_token_is_refused_on_the_head_before_the_body_is_sent(store):
    with running(store, "passthrough", token=TOKEN) as proxy:
        head = (
            b"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: proxy\r\n"
            b"proxy-authorization: Bearer wrong-token-0123456789\r\n"
            b"content-length: 30000000\r\n\r\n"
        )
        # No byte of the 30 MB body is sent: the answer comes from the head alone.
        reply = raw_exchange(proxy.port, head, timeout=30, half_close=False)
    assert status_of(reply) == 401
    assert b"connection: close" in reply.lower()


@pytest.mark.parametrize("sent", [PARTIAL, b""], ids=["half-sent", "silent"])
def test_a_head_that_does_not_arrive_in_time_is_dropped(store, sent):
    limits = Limits(head_timeout_s=0.2, grace_s=1)
    with running(store, "passthrough", limits=limits) as proxy:
        reply = raw_exchange(proxy.port, sent, timeout=30, half_close=False)
        assert httpx.get(proxy.url + "/_pyrula/health").status_code == 200  # still serving
    if sent:
        assert status_of(reply) == 408 and b"request head did not arrive" in reply
    else:
        assert reply == b""  # a connection that never spoke is closed without a word
