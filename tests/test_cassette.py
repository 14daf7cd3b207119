"""Cassette modes, the decorator form, the network guard and portable stores."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket

import httpx
import httpx2
import pytest

import pyrula
from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, json_reply


def _counting_upstream() -> Upstream:
    def reply(request):
        question = json.loads(request.content)["messages"][-1]["content"]
        return json_reply(chat_completion(f"answer to {question}"))

    return Upstream(OPENAI_LIB, reply)


def _ask(client, question: str) -> str:
    return (
        client.chat.completions.create(model="m", messages=ask(question)).choices[0].message.content
    )


def test_once_records_an_empty_cassette_then_refuses_new_requests(store_path):
    upstream = _counting_upstream()
    client = openai_client(upstream)
    with pyrula.cassette("once", store=store_path):
        assert _ask(client, "a") == "answer to a"
    with pyrula.cassette("once", store=store_path):
        assert _ask(client, "a") == "answer to a"
        with pytest.raises(pyrula.ReplayMiss, match="new_episodes"):
            _ask(client, "b")
    assert len(upstream.calls) == 1


def test_new_episodes_replays_what_it_has_and_records_the_rest(store_path):
    upstream = _counting_upstream()
    client = openai_client(upstream)
    with pyrula.cassette("episodes", mode="new_episodes", store=store_path):
        _ask(client, "a")
    with pyrula.cassette("episodes", mode="new_episodes", store=store_path):
        _ask(client, "a")
        _ask(client, "b")
    with pyrula.cassette("episodes", mode="none", store=store_path):
        assert [_ask(client, "a"), _ask(client, "b")] == ["answer to a", "answer to b"]
    assert [c["messages"][-1]["content"] for c in upstream.calls] == ["a", "b"]


def test_all_re_records_and_drops_what_the_new_pass_did_not_make(store_path):
    upstream = _counting_upstream()
    client = openai_client(upstream)
    with pyrula.cassette("all", store=store_path):
        _ask(client, "old")
    with pyrula.cassette("all", mode="all", store=store_path):
        _ask(client, "new")
    with pyrula.cassette("all", mode="none", store=store_path):
        assert _ask(client, "new") == "answer to new"
        with pytest.raises(pyrula.ReplayMiss):
            _ask(client, "old")


def test_all_keeps_the_old_recordings_when_the_block_fails(store_path):
    client = openai_client(_counting_upstream())
    with pyrula.cassette("keep", store=store_path):
        _ask(client, "precious")
    with pytest.raises(RuntimeError), pyrula.cassette("keep", mode="all", store=store_path):
        raise RuntimeError("test crashed before re-recording")
    with pyrula.cassette("keep", mode="none", store=store_path):
        assert _ask(client, "precious") == "answer to precious"


def test_verify_reports_a_reply_whose_structure_changed_and_writes_nothing(store_path):
    shape = {"extra": False}

    def reply(request):
        body = chat_completion("hi", model="gpt-moved" if shape["extra"] else "gpt-test")
        if shape["extra"]:
            body["choices"][0]["message"]["refusal"] = None
            body["service_tier"] = "default"
        return json_reply(body)

    client = openai_client(Upstream(OPENAI_LIB, reply))
    with pyrula.cassette("verify", store=store_path):
        _ask(client, "q")
    shape["extra"] = True
    with (
        pytest.warns(pyrula.VerifyMismatch, match="service_tier"),
        pyrula.cassette("verify", mode="verify", store=store_path) as verified,
    ):
        _ask(client, "q")
    (result,) = verified.verify_report
    assert not result.matches
    assert result.live_models == ["gpt-moved"] and result.recorded_models == ["gpt-test"]
    with pyrula.cassette("verify", mode="none", store=store_path):
        assert _ask(client, "q") == "hi"


def test_verify_passes_when_only_values_changed(store_path):
    answers = iter(["first", "second"])
    client = openai_client(
        Upstream(OPENAI_LIB, lambda r: json_reply(chat_completion(next(answers))))
    )
    with pyrula.cassette("verify-ok", store=store_path):
        _ask(client, "q")
    with pyrula.cassette("verify-ok", mode="verify", store=store_path) as verified:
        _ask(client, "q")
    assert [r.matches for r in verified.verify_report] == [True]


def test_decorator_form_on_sync_and_async_functions(store_path):
    upstream = _counting_upstream()

    @pyrula.cassette("decorated", store=store_path)
    def sync_call():
        return _ask(openai_client(upstream), "s")

    @pyrula.cassette("decorated-async", store=store_path)
    async def async_call():
        client = openai_client(upstream, is_async=True)
        reply = await client.chat.completions.create(model="m", messages=ask("a"))
        return reply.choices[0].message.content

    assert sync_call() == sync_call() == "answer to s"
    assert asyncio.run(async_call()) == asyncio.run(async_call()) == "answer to a"
    assert len(upstream.calls) == 2


@pytest.mark.parametrize("lib", [httpx, httpx2])
def test_replay_only_blocks_unjournaled_http_and_sockets(store_path, lib):
    Store(store_path).close()  # an existing, empty store
    with pyrula.cassette("guard", mode="none", store=store_path):
        with pytest.raises(pyrula.NetworkBlocked, match="replay-only"):
            lib.get("http://127.0.0.1:9/never")
        with pytest.raises(pyrula.NetworkBlocked):
            socket.create_connection(("127.0.0.1", 9), timeout=1)
    # The guard is gone once the block ends: the connect is attempted (and refused).
    with pytest.raises(OSError) as error:
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    assert not isinstance(error.value, pyrula.NetworkBlocked)


def test_a_copied_store_folder_replays_elsewhere(tmp_path):
    client = openai_client(_counting_upstream())
    with pyrula.cassette("portable", store=tmp_path / "here"):
        live = _ask(client, "p")
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    with pyrula.cassette("portable", mode="none", store=tmp_path / "there"):
        assert _ask(client, "p") == live


def test_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="once, none, new_episodes, all, verify"):
        pyrula.cassette("x", mode="sometimes")  # type: ignore[arg-type]


def test_request_lists_are_stored_once_across_turns(store_path):
    client = openai_client(_counting_upstream())
    history: list[dict[str, str]] = []
    with pyrula.cassette("growth", store=store_path):
        for turn in range(30):
            history.append({"role": "user", "content": f"turn {turn} " + "x" * 500})
            reply = client.chat.completions.create(model="m", messages=history)
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
    with Store(store_path) as store:
        exchanges = Exchanges(store)
        records = [r for _, r in exchanges.scan()]
        assert len(records) == 30
        last = max(records, key=lambda r: r.recorded_at)
        assert len(exchanges.request(last)["compared"]["messages"]) == 59
        blob_bytes = sum(len(v) for _, v in store.iter_prefix(store.blobs_db, b""))
    sent = sum(len(json.dumps(history[: 2 * t + 1])) for t in range(30))
    # Each message is stored once, not once per turn that repeats it.
    assert blob_bytes < sent / 5


def test_a_re_recorded_call_replays_its_new_reply_in_the_same_process(store_path):
    # Replays reuse what they decoded before; a recording replaced under the same key is new.
    replies = iter(["first", "second"])
    upstream = Upstream(OPENAI_LIB, lambda request: json_reply(chat_completion(next(replies))))
    client = openai_client(upstream)
    with pyrula.cassette("again", mode="all", store=store_path):
        assert _ask(client, "a") == "first"
    for _ in range(2):
        with pyrula.cassette("again", mode="none", store=store_path):
            assert _ask(client, "a") == "first"
    with pyrula.cassette("again", mode="all", store=store_path):
        assert _ask(client, "a") == "second"
    with pyrula.cassette("again", mode="none", store=store_path):
        assert _ask(client, "a") == "second"
