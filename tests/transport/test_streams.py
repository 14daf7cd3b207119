"""Live streams are teed as they flow and recorded only when their provider finished them."""

from __future__ import annotations

import gzip
import json
import threading

import pytest

import pyrula
from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import chat_completion, chat_sse, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, journal_transport, sse_reply


def _recorded(store_path) -> int:
    with Store(store_path) as store:
        return sum(1 for _ in Exchanges(store).scan())


def test_the_first_chunk_reaches_the_sdk_before_the_provider_sends_the_rest(store_path):
    first_seen = threading.Event()
    lib = OPENAI_LIB
    frames = chat_sse("alpha beta gamma")

    class Gated(lib.SyncByteStream):  # type: ignore[misc,name-defined]
        def __iter__(self):
            yield frames[0]
            # A recorder that buffered the reply would never let the SDK see frame 0.
            if not first_seen.wait(timeout=10):
                raise AssertionError("the SDK never saw the first chunk while the stream was open")
            yield from frames[1:]

    def handler(request):
        return lib.Response(200, headers={"content-type": "text/event-stream"}, stream=Gated())

    http = lib.Client(transport=journal_transport(lib, lib.MockTransport(handler)))
    import openai

    client = openai.OpenAI(api_key="sk-x", base_url="http://openai.test/v1", http_client=http)
    with pyrula.cassette("gate", store=store_path):
        chunks = []
        for chunk in client.chat.completions.create(model="m", messages=ask("go"), stream=True):
            chunks.append(chunk)
            first_seen.set()
    assert len(chunks) == len(frames) - 1
    assert _recorded(store_path) == 1


def test_a_stream_abandoned_early_is_not_recorded(store_path):
    upstream = Upstream(OPENAI_LIB, lambda r: sse_reply(chat_sse("a b c d e f")))
    client = openai_client(upstream)
    with pyrula.cassette("abandon", store=store_path):
        stream = client.chat.completions.create(model="m", messages=ask("go"), stream=True)
        next(iter(stream))
        stream.close()
    assert _recorded(store_path) == 0
    with (
        pyrula.cassette("abandon", mode="none", store=store_path),
        pytest.raises(pyrula.ReplayMiss),
    ):
        list(client.chat.completions.create(model="m", messages=ask("go"), stream=True))


def test_a_stream_that_ends_without_its_terminal_frame_is_not_recorded(store_path):
    upstream = Upstream(
        OPENAI_LIB, lambda r: sse_reply(chat_sse("cut off", finish=False, done=False))
    )
    client = openai_client(upstream)
    with pyrula.cassette("truncated", store=store_path):
        list(client.chat.completions.create(model="m", messages=ask("go"), stream=True))
    assert _recorded(store_path) == 0


def test_breaking_out_on_the_finish_chunk_leaves_the_call_recorded(store_path):
    upstream = Upstream(OPENAI_LIB, lambda r: sse_reply(chat_sse("x y")))
    client = openai_client(upstream)
    with (
        pyrula.cassette("finish", store=store_path),
        client.chat.completions.create(model="m", messages=ask("go"), stream=True) as stream,
    ):
        for chunk in stream:
            if chunk.choices and chunk.choices[0].finish_reason:
                break
    assert _recorded(store_path) == 1
    with pyrula.cassette("finish", mode="none", store=store_path):
        replayed = list(client.chat.completions.create(model="m", messages=ask("go"), stream=True))
    assert replayed[-1].choices[0].finish_reason == "stop"
    assert len(upstream.calls) == 1


def test_with_usage_requested_the_usage_chunk_is_recorded_too(store_path):
    upstream = Upstream(OPENAI_LIB, lambda r: sse_reply(chat_sse("x y", usage=True, done=False)))
    client = openai_client(upstream)
    kwargs = dict(
        model="m", messages=ask("go"), stream=True, stream_options={"include_usage": True}
    )
    with pyrula.cassette("usage", store=store_path):
        live = [c.model_dump() for c in client.chat.completions.create(**kwargs)]
    with pyrula.cassette("usage", mode="none", store=store_path):
        replayed = [c.model_dump() for c in client.chat.completions.create(**kwargs)]
    assert replayed == live and live[-1]["usage"]["total_tokens"] == 7


def test_a_gzip_reply_replays_without_contradicting_its_headers(store_path):
    body = gzip.compress(json.dumps(chat_completion("zipped")).encode())
    upstream = Upstream(
        OPENAI_LIB,
        lambda r: (200, {"content-type": "application/json", "content-encoding": "gzip"}, [body]),
    )
    client = openai_client(upstream)
    with pyrula.cassette("gzip", store=store_path):
        live = client.chat.completions.create(model="m", messages=ask("z"))
    with pyrula.cassette("gzip", mode="none", store=store_path):
        replayed = client.chat.completions.create(model="m", messages=ask("z"))
    assert replayed.choices[0].message.content == live.choices[0].message.content == "zipped"
    with Store(store_path) as store:
        ((_, record),) = Exchanges(store).scan()
    assert "content-encoding" not in {k.lower() for k, _ in record.headers}


def test_a_stream_over_the_size_cap_raises_payload_too_large(tmp_path):
    store = Store(tmp_path / "cap", max_record_bytes=2_000)
    upstream = Upstream(OPENAI_LIB, lambda r: sse_reply(chat_sse(" ".join(["word"] * 200))))
    client = openai_client(upstream)
    with pyrula.cassette("cap", store=store), pytest.raises(pyrula.PayloadTooLarge):
        list(client.chat.completions.create(model="m", messages=ask("long"), stream=True))
    assert sum(1 for _ in Exchanges(store).scan()) == 0
    store.close()


def test_async_stream_abandoned_early_is_not_recorded(store_path):
    import asyncio

    upstream = Upstream(OPENAI_LIB, lambda r: sse_reply(chat_sse("a b c d")))
    client = openai_client(upstream, is_async=True)

    async def main():
        stream = await client.chat.completions.create(model="m", messages=ask("go"), stream=True)
        async for _ in stream:
            break
        await stream.close()

    with pyrula.cassette("async-abandon", store=store_path):
        asyncio.run(main())
    assert _recorded(store_path) == 0


def test_a_replayed_stream_is_byte_for_byte_with_its_chunk_boundaries(store_path):
    frames = chat_sse("exact bytes please", usage=True)
    lib = OPENAI_LIB
    upstream = Upstream(lib, lambda r: sse_reply(frames))
    client = lib.Client(transport=journal_transport(lib, upstream.transport()))
    body = {
        "model": "m",
        "messages": ask("x"),
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    def read() -> list[bytes]:
        with client.stream("POST", "http://openai.test/v1/chat/completions", json=body) as reply:
            return list(reply.iter_raw())

    with pyrula.cassette("bytes", store=store_path):
        assert read() == frames
    with pyrula.cassette("bytes", mode="none", store=store_path):
        assert read() == frames
    assert len(upstream.calls) == 1
