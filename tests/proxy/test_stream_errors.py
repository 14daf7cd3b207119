"""Through the proxy, an OpenAI-chat stream that ends in an error event (no `[DONE]`) is
recorded, and replays as the same `openai.APIError` instead of a 409 replay miss."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.fakes.openai_api import SSE_HEADERS, chat_chunks
from tests.fakes.server import Script, Server
from tests.proxy.support import KEY, routes_to, running

ERROR = {"error": {"message": "Service unavailable, retry later", "type": "server_error"}}
FRAMES = [
    *chat_chunks(["Hel"], done=False, finish=False),
    b"event: error\ndata: " + json.dumps(ERROR).encode() + b"\n\n",
]


def _consume(proxy) -> str:
    client = openai.OpenAI(
        api_key=KEY,
        base_url=proxy.base_url("groq") + "/openai/v1",
        max_retries=0,
        http_client=httpx.Client(),
    )
    stream = client.chat.completions.create(
        model="llama", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError) as caught:
        for _chunk in stream:
            pass
    return str(caught.value)


def test_an_error_event_stream_replays_as_the_same_error(store):
    script = Script(headers=SSE_HEADERS, frames=FRAMES, chunked=True)
    with Server(lambda seen: script) as upstream:
        routes = routes_to(upstream.url, "groq")
        with running(store, "record", routes=routes) as proxy:
            live = _consume(proxy)
        with running(store, "replay", routes=routes) as proxy:
            replayed = _consume(proxy)
        assert len(upstream.seen) == 1
    assert replayed == live and "Service unavailable" in live
