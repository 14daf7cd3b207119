"""The proxy replays a stream with its recorded frame boundaries (each frame one HTTP chunk),
as fast as the client reads or, with `--replay-timing recorded`, at the recorded pace."""

from __future__ import annotations

import json

import openai
import pytest
from pyrula.proxy import ConfigError, ProxyConfig

from pyrula.cassette import Cassette
from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import SSE_HEADERS, chat_chunks
from tests.fakes.provider import OPENAI_LIB, Upstream, journal_transport
from tests.proxy.support import KEY, raw_exchange, running

ASK = [{"role": "user", "content": "count"}]
PIECES = [f"word{n} " for n in range(12)]


def _chunk_sizes(reply: bytes) -> list[int]:
    """The sizes of the chunks of a chunked HTTP reply, from its raw bytes."""
    head, _, body = reply.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    sizes = []
    while True:
        line, _, body = body.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            return sizes
        sizes.append(size)
        body = body[size + 2 :]


def _record(store) -> list[bytes]:
    frames = chat_chunks(PIECES)
    upstream = Upstream(OPENAI_LIB, lambda request: (200, SSE_HEADERS, frames))
    client = openai.OpenAI(
        api_key=KEY,
        base_url="https://api.openai.com/v1",
        http_client=OPENAI_LIB.Client(
            transport=journal_transport(OPENAI_LIB, upstream.transport())
        ),
    )
    with Cassette("frames", store=store):
        list(client.chat.completions.create(model="m", messages=ASK, stream=True))
    return frames


@pytest.mark.parametrize("timing", ["fast", "recorded"])
def test_a_replayed_stream_keeps_its_recorded_frames(store, timing):
    frames = _record(store)
    body = json.dumps({"model": "m", "messages": ASK, "stream": True}).encode()
    request = (
        b"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
        b"content-type: application/json\r\n"
        + f"authorization: Bearer {KEY}\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    with running(store, "replay", cassette="frames", replay_timing=timing) as proxy:
        reply = raw_exchange(proxy.port, request, half_close=False)
    assert _chunk_sizes(reply) == [len(frame) for frame in frames]


def test_the_record_keeps_when_each_frame_arrived(store):
    frames = _record(store)
    with Store(store) as opened:
        [(_key, record)] = list(Exchanges(opened).scan())
    times = record.extra["frame_ms"]
    assert len(times) == len(frames) and times == sorted(times)


def test_an_unknown_replay_timing_is_refused(store):
    with pytest.raises(ConfigError, match="recorded"):
        ProxyConfig(store=store, replay_timing="slow")
