"""The record cap in a cassette: an over-cap plain reply is sent once (the refusal is carried out
of the SDK's retry loop), and a stream whose `[DONE]` alone crosses the cap ends the same way live
and replayed."""

from __future__ import annotations

import json

import pytest

import pyrula
from pyrula.errors import PayloadTooLarge, RecordRefused
from pyrula.journal import Exchanges, Store
from tests.fakes.anthropic_api import anthropic_client, anthropic_message
from tests.fakes.openai_api import SSE_HEADERS, chat_chunks, chat_completion, openai_client
from tests.fakes.provider import ANTHROPIC_LIB, OPENAI_LIB, Upstream, ask, json_reply

BIG = "word " * 4000


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_an_over_cap_plain_reply_is_sent_once_and_raised_as_itself(tmp_path, sdk):
    if sdk == "openai":
        upstream = Upstream(OPENAI_LIB, lambda r: json_reply(chat_completion(BIG)))
        client = openai_client(upstream, max_retries=2)

        def call():
            client.chat.completions.create(model="m", messages=ask("long"))
    else:
        upstream = Upstream(ANTHROPIC_LIB, lambda r: json_reply(anthropic_message(BIG)))
        client = anthropic_client(upstream, max_retries=2)

        def call():
            client.messages.create(model="c", max_tokens=10, messages=ask("long"))

    store = Store(tmp_path / "cap", max_record_bytes=2_000)
    with (
        pytest.raises(PayloadTooLarge, match="max_event_payload_bytes"),
        pyrula.cassette("cap", store=store),
    ):
        with pytest.raises(RecordRefused):  # inside the block: a JournalRefusal, by name
            call()
        call()
    assert len(upstream.calls) == 2  # once per call made, never once per SDK retry
    store.close()


def test_a_stream_whose_done_alone_crosses_the_cap_ends_the_same_live_and_replayed(
    tmp_path, monkeypatch
):
    frames = chat_chunks(["a", "b", "c"])
    assert frames[-1] == b"data: [DONE]\n\n"
    upstream = Upstream(OPENAI_LIB, lambda r: (200, SSE_HEADERS, frames))
    client = openai_client(upstream, max_retries=0)

    def read() -> str:
        stream = client.chat.completions.create(model="m", messages=ask("s"), stream=True)
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with pyrula.cassette("probe", store=tmp_path / "probe"):
        read()
    with Store(tmp_path / "probe") as probe:
        exchanges = Exchanges(probe)
        ((_key, record),) = exchanges.scan()
        request = len(json.dumps(exchanges.request(record)))
    cap = record.size + request - 1  # everything fits but the last byte of [DONE]
    store = tmp_path / "tight"
    monkeypatch.setenv("PYRULA_MAX_RECORD_BYTES", str(cap))
    with pyrula.cassette("tight", store=store):
        live = read()  # no error: the reply was recorded whole at its last event
    with pyrula.cassette("tight", "none", store=store):
        replayed = read()
    assert live == replayed == "abc"
