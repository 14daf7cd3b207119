"""A provider the proxy has no default route for (an OpenAI-compatible API under its own base
path, as Groq and OpenRouter serve theirs), added with `--route NAME=URL`: recorded and replayed
with the OpenAI SDK pointed at the proxy."""

from __future__ import annotations

import openai
from pyrula.proxy import parse_route

from tests.fakes import openai_api
from tests.fakes.server import Server, serving
from tests.proxy.support import KEY, running

ASK = [{"role": "user", "content": "Ping?"}]


def _ask(client: openai.OpenAI) -> tuple[dict[str, object], list[dict[str, object]]]:
    plain = client.chat.completions.create(model="llama-test", messages=ASK)
    chunks = client.chat.completions.create(model="llama-test", messages=ASK, stream=True)
    return plain.model_dump(), [chunk.model_dump() for chunk in chunks]


def test_an_added_route_records_and_replays_an_openai_compatible_provider(store):
    provider = openai_api.upstream(base_path="/openai/v1")
    with Server(serving(provider.reply)) as server:
        routes = (parse_route(f"groq={server.url}/openai"),)
        with running(store, "record", routes=routes) as proxy:
            base_url = proxy.base_url("groq") + "/v1"
            live = _ask(openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0))
        sent = [(seen.method, seen.path) for seen in server.seen]
        with running(store, "replay", routes=routes) as proxy:
            base_url = proxy.base_url("groq") + "/v1"
            replayed = _ask(openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0))
        assert server.count() == 2  # the replay never reached the provider
    assert sent == [("POST", "/openai/v1/chat/completions")] * 2
    assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert replayed == live
    assert live[0]["choices"][0]["message"]["content"] == openai_api.ANSWER
    assert "".join(c["choices"][0]["delta"]["content"] or "" for c in live[1] if c["choices"])
