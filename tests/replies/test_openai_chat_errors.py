"""An OpenAI-chat stream that ends in an error event (as Groq and other OpenAI-compatible
providers end a failed stream: `event: error`, `data: {"error": ...}`, no `[DONE]`) is the
call's outcome: recorded, and replayed as the same `openai.APIError`."""

from __future__ import annotations

import json

import openai
import pytest

import pyrula
from tests.fakes.openai_api import SSE_HEADERS, chat_chunks, openai_client
from tests.fakes.provider import OPENAI_LIB, TEST_KEY, Upstream

ERROR = {"error": {"message": "Service unavailable, retry later", "type": "server_error"}}


def _failed_stream(request):
    first = chat_chunks(["Hel"], done=False, finish=False)
    return (
        200,
        SSE_HEADERS,
        [*first, b"event: error\ndata: " + json.dumps(ERROR).encode() + b"\n\n"],
    )


def _consume(client) -> str:
    stream = client.chat.completions.create(
        model="llama", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError) as caught:
        for _chunk in stream:
            pass
    return str(caught.value)


@pytest.mark.parametrize("mode", ["once", "none"])
def test_a_stream_ending_in_an_error_event_is_recorded_and_replays_the_same_error(store_path, mode):
    upstream = Upstream(OPENAI_LIB, _failed_stream)
    client = openai_client(upstream, api_key=TEST_KEY, max_retries=0)
    with pyrula.cassette("groq-error", "once", store=store_path):
        live = _consume(client)
    with pyrula.cassette("groq-error", mode, store=store_path):
        replayed = _consume(client)
    assert replayed == live and "Service unavailable" in live
    assert len(upstream.calls) == 1  # the failed stream was the outcome, recorded once
