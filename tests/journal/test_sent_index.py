"""The sent index: a request recorded by another process is replayed without canonicalising it,
with exactly the reply the canonicalising path gives; any other request takes that path.

Each test records in a child process, so the requests are new to this one (as in a suite
replaying what an earlier run recorded): nothing of them is in the process's canonical cache.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyrula.fingerprints import RequestParts, canonicalize, sent_digest
from typer.testing import CliRunner

import pyrula
from pyrula.errors import ReplayMiss
from pyrula.journal import Exchanges, Store
from tests.fakes.elsewhere import record_elsewhere

OLD_KEY = "sk-recorded-with-this-key-0123456789"
NEW_KEY = "sk-replayed-with-another-key-9876543210"
CHAT = "http://openai.test/v1/chat/completions"
MESSAGES = "http://anthropic.test/v1/messages"
GEMINI = "http://genai.test/v1beta/models/gemini-test:generateContent"


def _chat(text: str, key: str = NEW_KEY) -> tuple[str, dict[str, str], bytes]:
    body = json.dumps({"model": "gpt-test", "messages": [{"role": "user", "content": text}]})
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    return CHAT, headers, body.encode()


def _offline() -> tuple[httpx.Client, list[httpx.Request]]:
    """A raw client through Pyrula whose provider logs every request that reached it."""
    reached: list[httpx.Request] = []

    def provider(request: httpx.Request) -> httpx.Response:
        reached.append(request)
        return httpx.Response(500)

    return httpx.Client(transport=pyrula.HttpxTransport(httpx.MockTransport(provider))), reached


def _replay(store: Any, requests: list[tuple[str, dict[str, str], bytes]], cassette: str = "sent"):
    """Each request replayed in one block: (status, content-type, body) or the miss's message."""
    client, reached = _offline()
    results: list[Any] = []
    with pyrula.cassette(cassette, mode="none", store=store) as cas:
        for url, headers, body in requests:
            try:
                reply = client.post(url, headers=headers, content=body)
                results.append((reply.status_code, reply.headers["content-type"], reply.content))
            except ReplayMiss as miss:
                results.append(str(miss))
    assert reached == []
    return results, cas.stats


def _warm(requests: list[tuple[str, dict[str, str], bytes]]) -> None:
    """Canonicalise the requests here, so their next replay takes the canonicalising path."""
    for url, headers, body in requests:
        canonicalize(RequestParts("POST", url, headers, body))


def test_a_replay_with_another_api_key_is_found_by_its_sent_digest_and_no_key_is_stored(
    store_location,
):
    nonce = uuid.uuid4().hex
    recorded = [
        _chat(f"chat {nonce}", key=OLD_KEY),
        (
            MESSAGES,
            {"x-api-key": OLD_KEY, "anthropic-beta": "prompt-caching-2024-07-31"},
            json.dumps(
                {
                    "model": "claude-test",
                    "max_tokens": 5,
                    "messages": [{"role": "user", "content": nonce}],
                }
            ).encode(),
        ),
        (
            f"{GEMINI}?key={OLD_KEY}",
            {"x-goog-api-key": OLD_KEY},
            json.dumps({"contents": [{"role": "user", "parts": [{"text": nonce}]}]}).encode(),
        ),
    ]
    replies = [{"answer": n} for n in range(3)]
    record_elsewhere(store_location, recorded, replies)
    replayed = [
        (url.replace(OLD_KEY, NEW_KEY), {k: v.replace(OLD_KEY, NEW_KEY) for k, v in h.items()}, b)
        for url, h, b in recorded
    ]

    with Store(store_location) as store:
        results, stats = _replay(store, replayed)
        assert [json.loads(body) for _, _, body in results] == replies
        assert stats.replayed == 3
        # A local store finds each by its sent digest; PostgreSQL keeps the index but reads the
        # canonicalising way (a second round trip would cost more than it saves).
        assert stats.sent_hits == (3 if store.backend == "lmdb" else 0)

        # The index holds 32-byte digests that no key went into: the digest of each request
        # as replayed, with another key, against the fingerprint of its record.
        index = dict(store.iter_prefix(store.db("sent_index"), b""))
        fingerprints = {record.fingerprint for _, record in Exchanges(store).scan()}
        assert index == {
            sent_digest(RequestParts("POST", url, headers, body)): bytes.fromhex(fingerprint)
            for (url, headers, body), fingerprint in zip(
                replayed, [_fingerprint(r) for r in recorded], strict=True
            )
        }
        assert {value.hex() for value in index.values()} == fingerprints
    if store.backend == "lmdb":
        assert OLD_KEY.encode() not in (Path(store_location) / "data.mdb").read_bytes()


def _fingerprint(request: tuple[str, dict[str, str], bytes]) -> str:
    url, headers, body = request
    return canonicalize(RequestParts("POST", url, headers, body)).digest


def test_the_sent_digest_replays_exactly_what_canonicalising_replays(store_path):
    nonce = uuid.uuid4().hex
    same = _chat(f"asked three times {nonce}")
    streamed = _chat(f"streamed {nonce}")
    sse = [f'data: {{"n": {n}}}\n\n' for n in range(3)] + ["data: [DONE]\n\n"]
    recorded = [same, streamed, same, same]
    record_elsewhere(str(store_path), recorded, [{"n": 0}, sse, {"n": 1}, {"n": 2}])
    # A fourth `same` was never recorded: the miss must read the same either way.
    asked = [*recorded, same]

    with Store(store_path) as store:
        by_digest, fast = _replay(store, asked)
        _warm(asked)
        by_canonical, slow = _replay(store, asked)
    assert by_digest == by_canonical
    assert [json.loads(r[2]) for r in by_digest if r[1] == "application/json"] == [
        {"n": 0},
        {"n": 1},
        {"n": 2},
    ]
    assert by_digest[1] == (200, "text/event-stream", "".join(sse).encode())
    assert "recorded this" in by_digest[4] and "3 time(s); this is call 4" in by_digest[4]
    assert (fast.replayed, fast.sent_hits) == (4, 4)
    assert (slow.replayed, slow.sent_hits) == (4, 0)


def test_a_request_differing_in_a_fingerprinted_byte_takes_the_canonicalising_path(store_path):
    nonce = uuid.uuid4().hex
    record_elsewhere(str(store_path), [_chat(f"Ping {nonce}?")], [{"n": 0}])
    changed = [_chat(f"Ping {nonce}!")]
    # The same request re-serialised: other bytes, the same fingerprint.
    url, headers, body = _chat(f"Ping {nonce}?")
    reformatted = [(url, headers, json.dumps(json.loads(body), indent=2).encode())]

    with Store(store_path) as store:
        missed, stats = _replay(store, changed)
        assert stats.sent_hits == 0
        assert "differs in" in missed[0] and "messages" in missed[0]
        _warm(changed)
        assert _replay(store, changed)[0] == missed  # the same error as without the index

        replayed, stats = _replay(store, reformatted)
        assert json.loads(replayed[0][2]) == {"n": 0}
        assert (stats.replayed, stats.sent_hits) == (1, 0)


def _export_import(store_path: Path, tmp_path: Path, strip_sent: bool = False) -> Path:
    """Export `store_path` and import it into a new store (each record's `extra.sent` taken out
    first with `strip_sent`, as an export of records from before it was kept); its path."""
    from pyrula.cli.app import app

    exported, imported = tmp_path / "all.jsonl", tmp_path / "imported"
    result = CliRunner().invoke(
        app, ["journal", "export", "--store", str(store_path), "-o", str(exported)]
    )
    assert result.exit_code == 0, result.output
    if strip_sent:
        lines = [json.loads(line) for line in exported.read_text().splitlines()]
        for line in lines:
            assert line["record"]["extra"].pop("sent")
        exported.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = CliRunner().invoke(app, ["journal", "import", str(exported), "--store", str(imported)])
    assert result.exit_code == 0, result.output
    return imported


def test_an_imported_export_carries_the_index_and_replays_by_the_sent_digest(store_path, tmp_path):
    nonce = uuid.uuid4().hex
    requests = [_chat(f"exported {nonce} {n}") for n in range(2)]
    record_elsewhere(str(store_path), requests, [{"n": 0}, {"n": 1}])
    with Store(store_path) as store:
        index = dict(store.iter_prefix(store.db("sent_index"), b""))

    with Store(_export_import(store_path, tmp_path)) as store:
        assert dict(store.iter_prefix(store.db("sent_index"), b"")) == index
        results, stats = _replay(store, requests)
    assert [json.loads(r[2]) for r in results] == [{"n": 0}, {"n": 1}]
    assert (stats.replayed, stats.sent_hits) == (2, 2)


def test_records_without_their_digest_import_with_no_index_and_replay_by_canonicalising(
    store_path, tmp_path
):
    nonce = uuid.uuid4().hex
    requests = [_chat(f"exported {nonce} {n}") for n in range(2)]
    record_elsewhere(str(store_path), requests, [{"n": 0}, {"n": 1}])

    with Store(_export_import(store_path, tmp_path, strip_sent=True)) as store:
        assert list(store.iter_prefix(store.db("sent_index"), b"")) == []
        results, stats = _replay(store, requests)
    assert [json.loads(r[2]) for r in results] == [{"n": 0}, {"n": 1}]
    assert (stats.replayed, stats.sent_hits) == (2, 0)


def test_a_text_cassettes_rebuilt_cache_replays_by_the_sent_digest(tmp_path):
    """A fresh clone (CI): the cassette file is all there is; its cache is built from it."""
    nonce = uuid.uuid4().hex
    requests = [_chat(f"in a file {nonce}"), _chat(f"in a file {nonce}", key=OLD_KEY)]
    file = tmp_path / "cassettes" / "test_chat.json"
    record_elsewhere(str(tmp_path / "cache"), requests, [{"n": 0}, {"n": 1}], path=str(file))
    entries = json.loads(file.read_text())["exchanges"]
    assert [len(e["extra"]["sent"]) for e in entries] == [64, 64]
    assert OLD_KEY not in file.read_text() and NEW_KEY not in file.read_text()

    client, reached = _offline()
    with pyrula.cassette("sent", mode="none", store=tmp_path / "clone", path=file) as cas:
        replies = [client.post(url, headers=h, content=b).json() for url, h, b in requests]
    assert (replies, reached) == ([{"n": 0}, {"n": 1}], [])
    assert (cas.stats.replayed, cas.stats.sent_hits) == (2, 2)


def test_a_garbled_digest_in_a_cassette_file_is_left_out_and_the_request_canonicalised(tmp_path):
    nonce = uuid.uuid4().hex
    file = tmp_path / "test_chat.json"
    record_elsewhere(str(tmp_path / "cache"), [_chat(nonce)], [{"n": 0}], path=str(file))
    document = json.loads(file.read_text())
    document["exchanges"][0]["extra"]["sent"] = "not hex"
    file.write_text(json.dumps(document))

    client, reached = _offline()
    with pyrula.cassette("sent", mode="none", store=tmp_path / "clone", path=file) as cas:
        url, headers, body = _chat(nonce)
        assert client.post(url, headers=headers, content=body).json() == {"n": 0}
    assert (cas.stats.replayed, cas.stats.sent_hits, reached) == (1, 0, [])


@pytest.mark.parametrize("mode", ["once", "new_episodes"])
def test_the_modes_that_replay_use_the_sent_digest(store_path, mode):
    nonce = uuid.uuid4().hex
    record_elsewhere(str(store_path), [_chat(nonce)], [{"n": 0}], cassette=mode)
    client, reached = _offline()
    with Store(store_path) as store, pyrula.cassette(mode, mode=mode, store=store) as cas:
        url, headers, body = _chat(nonce)
        assert client.post(url, headers=headers, content=body).json() == {"n": 0}
    assert (reached, cas.stats.sent_hits) == ([], 1)


def test_a_block_entered_empty_in_mode_once_records_without_the_index(store_path):
    record_elsewhere(str(store_path), [_chat(uuid.uuid4().hex)], [{"n": 0}], cassette="filled")
    with Store(store_path) as store:
        assert Exchanges(store).finds_sent()
        with pyrula.cassette("filled", mode="once", store=store) as filled:
            assert filled.replay_sent is not None
        with pyrula.cassette("empty", mode="once", store=store) as empty:
            assert empty.replay_sent is None  # it records everything: no digest is computed
        with pyrula.cassette("empty", mode="new_episodes", store=store) as again:
            assert again.replay_sent is not None


def test_a_store_from_before_the_index_opened_read_only_replays_by_canonicalising(store_path):
    import lmdb

    nonce = uuid.uuid4().hex
    record_elsewhere(str(store_path), [_chat(nonce)], [{"n": 0}])
    env = lmdb.open(str(store_path), max_dbs=16)
    with env.begin(write=True) as txn:  # as a store written before the index existed
        txn.drop(env.open_db(b"sent_index", txn=txn), delete=True)
    env.close()

    with Store(store_path, readonly=True) as store:
        results, stats = _replay(store, [_chat(nonce)])
    assert json.loads(results[0][2]) == {"n": 0}
    assert (stats.replayed, stats.sent_hits) == (1, 0)


def test_collect_garbage_drops_the_entries_of_deleted_records_only(store_path):
    nonce = uuid.uuid4().hex
    kept, deleted = _chat(f"kept {nonce}"), _chat(f"deleted {nonce}")
    record_elsewhere(str(store_path), [kept, deleted], [{"n": 0}, {"n": 1}])
    with Store(store_path) as store:
        exchanges = Exchanges(store)
        index = store.db("sent_index")
        assert len(list(store.iter_prefix(index, b""))) == 2
        # Told apart by their replies: canonicalising them here would warm this process.
        replies = {
            key: json.loads(exchanges.body(*exchanges.get(key))) for key, _ in exchanges.scan()
        }
        fingerprints = {replies[key]["n"]: record.fingerprint for key, record in exchanges.scan()}
        exchanges.delete(key for key, reply in replies.items() if reply == {"n": 1})
        exchanges.collect_garbage()
        assert [v.hex() for _, v in store.iter_prefix(index, b"")] == [fingerprints[0]]
        results, stats = _replay(store, [kept])
    assert json.loads(results[0][2]) == {"n": 0}
    assert stats.sent_hits == 1


def test_an_async_client_replays_by_the_sent_digest_too(store_path):
    import asyncio

    nonce = uuid.uuid4().hex
    record_elsewhere(str(store_path), [_chat(nonce)], [{"n": 0}])

    def provider(request: httpx.Request) -> httpx.Response:
        raise AssertionError("the provider was reached")

    async def replay() -> Any:
        transport = pyrula.AsyncHttpxTransport(httpx.MockTransport(provider))
        async with httpx.AsyncClient(transport=transport) as client:
            url, headers, body = _chat(nonce)
            return (await client.post(url, headers=headers, content=body)).json()

    with Store(store_path) as store, pyrula.cassette("sent", mode="none", store=store) as cas:
        assert asyncio.run(replay()) == {"n": 0}
    assert cas.stats.sent_hits == 1
