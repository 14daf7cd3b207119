"""The proxy's replay-miss answer gives the proxy's advice (its flags and headers), not the
in-process cassette's modes or pytest's options."""

from __future__ import annotations

import httpx

from tests.proxy.support import KEY, running

ASK = {"model": "m", "messages": [{"role": "user", "content": "never recorded"}]}


def test_a_miss_names_the_proxys_flags_and_headers_not_pytests(store):
    store.mkdir()
    with running(store, "auto") as proxy:  # makes the store, so replay mode can open it
        pass
    with running(store, "replay") as proxy:
        reply = httpx.post(
            proxy.base_url("openai") + "/v1/chat/completions",
            json=ASK,
            headers={"authorization": f"Bearer {KEY}"},
        )
    assert reply.status_code == 409
    message = reply.json()["error"]["message"]
    assert "--mode auto" in message and "x-pyrula-cassette" in message
    assert "pytest" not in message and "mode='new_episodes'" not in message
