"""The OpenAI-compatible providers through the proxy: the OpenAI SDK pointed at `/<provider>`
records from a local stand-in for the provider's host, then replays offline into equal objects."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest
from pyrula.proxy import DEFAULT_ROUTES, Route
from pyrula.proxy.routes import RouteTable

from tests.fakes.openai_api import SSE_HEADERS
from tests.fakes.provider import OPENAI_LIB
from tests.fakes.server import Script, Seen, Server
from tests.proxy.support import KEY, running
from tests.replies.support import ASK, PROVIDERS, Compatible, completion, stream

_ROUTES = {route.name: route for route in DEFAULT_ROUTES}


def _script(provider: Compatible) -> Any:
    def reply(seen: Seen) -> Script:
        if seen.json().get("stream"):
            return Script(headers=SSE_HEADERS, frames=stream(provider), chunked=True)
        return Script(frames=[json.dumps(completion(provider)).encode()])

    return reply


def _calls(proxy: Any, provider: Compatible) -> tuple[Any, list[Any]]:
    client = openai.OpenAI(
        api_key=KEY,
        base_url=proxy.base_url(provider.name) + provider.proxy_suffix,
        http_client=OPENAI_LIB.Client(),
        max_retries=0,
    )
    plain = client.chat.completions.create(model=provider.model, messages=ASK)  # type: ignore[arg-type]
    chunks = client.chat.completions.create(
        model=provider.model,
        messages=ASK,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    return plain.model_dump(), [chunk.model_dump() for chunk in chunks]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_recorded_through_its_route_and_replayed_offline(store, provider):
    # The provider's own route, pointed at a stand-in that keeps the route's base path.
    base_path = urlsplit(_ROUTES[provider.name].upstream).path
    with Server(_script(provider)) as upstream:
        routes = (Route(provider.name, upstream.url + base_path),)
        with running(store, "record", routes=routes) as proxy:
            recorded = _calls(proxy, provider)
        assert [seen.path for seen in upstream.seen] == [
            base_path + provider.proxy_suffix + "/chat/completions"
        ] * 2
        with running(store, "replay", routes=routes) as proxy:
            replayed = _calls(proxy, provider)
        assert upstream.count() == 2  # nothing reached the provider while replaying
    assert replayed == recorded
    assert recorded[0]["choices"][0]["message"]["content"] == "The pyrula fig shell."


@pytest.mark.parametrize(
    ("path", "url"),
    [
        ("/groq/v1/chat/completions", "https://api.groq.com/openai/v1/chat/completions"),
        ("/openrouter/v1/chat/completions", "https://openrouter.ai/api/v1/chat/completions"),
        ("/deepseek/chat/completions", "https://api.deepseek.com/chat/completions"),
        ("/ollama/v1/chat/completions", "http://localhost:11434/v1/chat/completions"),
        ("/vllm/v1/models", "http://localhost:8000/v1/models"),
    ],
)
def test_default_routes_reach_each_provider_at_its_openai_base_path(path, url):
    target = RouteTable(DEFAULT_ROUTES).resolve(path.encode())
    assert target is not None and target.url == url
