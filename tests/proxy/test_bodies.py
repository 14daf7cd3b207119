"""Large request bodies: spooled to disk as they arrive, forwarded byte for byte, loaded into
memory only within the proxy's byte budget (the rest wait, on disk), and refused past the body
limit with an error the SDK reads."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from pyrula.proxy import Limits

from tests.fakes.openai_api import chat_json
from tests.fakes.server import Script, Server
from tests.proxy.support import routes_to, running

SPOOLED = Limits(spool_bytes=1024, max_buffered_bytes=1, grace_s=2)


def _chat(text: str) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()


def test_a_spooled_body_is_forwarded_and_recorded_byte_for_byte(store):
    body = _chat("image " * 50_000)  # 300 kB: far past the 1 kB spool threshold
    with Server(lambda seen: Script(frames=[chat_json("seen")])) as upstream:
        with running(store, "record", routes=routes_to(upstream.url), limits=SPOOLED) as proxy:
            live = httpx.post(proxy.base_url("openai") + "/v1/chat/completions", content=body)
        with running(store, "replay", routes=routes_to(upstream.url), limits=SPOOLED) as proxy:
            replayed = httpx.post(proxy.base_url("openai") + "/v1/chat/completions", content=body)
    assert [seen.body for seen in upstream.seen] == [body]
    assert live.status_code == replayed.status_code == 200
    assert replayed.content == live.content == chat_json("seen")


def test_spooled_bodies_wait_on_disk_while_the_budget_is_held(store):
    # A budget of one byte: one spooled body in memory at a time. The first is held while its
    # reply waits at the gate; the second must wait its turn before it reaches the upstream.
    gate = threading.Event()
    held = Script(frames=[b"{", b'"a": 1}'], chunked=True, gate=gate)
    with (
        Server(lambda seen: Script(frames=[chat_json("second")]), held) as upstream,
        running(store, "passthrough", routes=routes_to(upstream.url), limits=SPOOLED) as proxy,
        ThreadPoolExecutor(2) as pool,
        httpx.Client(timeout=30) as client,
    ):
        url = proxy.base_url("openai") + "/v1/chat/completions"
        first = pool.submit(client.post, url, content=_chat("first " * 2000))
        _wait_for(client, proxy, lambda bodies: bodies["in_memory"] == 1)
        _wait_for(client, proxy, lambda bodies: upstream.count() == 1)  # its reply at the gate
        second = pool.submit(client.post, url, content=_chat("second " * 2000))
        _wait_for(client, proxy, lambda bodies: bodies["waiting"] == 1)
        assert upstream.count() == 1  # the second body is on disk, not yet loaded or sent
        gate.set()
        assert first.result().content == b'{"a": 1}'
        assert second.result().content == chat_json("second")
    assert [json.loads(seen.body)["messages"][0]["content"][:6] for seen in upstream.seen] == [
        "first ",
        "second",
    ]


def _wait_for(client: httpx.Client, proxy, ready) -> None:
    for _ in range(2000):
        bodies = client.get(proxy.url + "/_pyrula/health").json()["request_bodies"]
        if ready(bodies):
            return
        threading.Event().wait(0.01)
    pytest.fail(f"the proxy never reached the expected state: {bodies}")


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_gets_413_in_the_providers_error_shape(store, declared):
    limits = Limits(max_body_bytes=10_000, spool_bytes=1024, grace_s=2)
    with (
        Server(lambda seen: Script(frames=[chat_json("never")])) as upstream,
        running(store, "record", routes=routes_to(upstream.url), limits=limits) as proxy,
    ):
        if declared:
            client = openai.OpenAI(
                api_key="sk-x", base_url=proxy.base_url("openai") + "/v1", max_retries=2
            )
            with pytest.raises(openai.APIStatusError) as caught:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x" * 20_000}]
                )
            assert caught.value.status_code == 413
            assert "--max-body-bytes" in caught.value.message
            error = caught.value.body
        else:
            pieces = iter([_chat("y" * 20_000)[i : i + 4096] for i in range(0, 20_100, 4096)])
            reply = httpx.post(proxy.base_url("openai") + "/v1/chat/completions", content=pieces)
            assert reply.status_code == 413
            error = reply.json()["error"]
    assert error["type"] == "pyrula_too_large"
    assert upstream.count() == 0  # never forwarded, and the SDK did not retry it
