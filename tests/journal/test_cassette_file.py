"""Text cassettes: a readable, deterministic file per cassette that replays byte for byte, with
the store as its cache (rebuilt only when the file's digest changes)."""

from __future__ import annotations

import json
import os

import pytest

import pyrula
from pyrula.errors import CassetteFileError
from pyrula.journal import Exchange, Exchanges, Store, cassette_file
from pyrula.journal.keys import cassette_key, namespace_prefix
from tests.fakes import anthropic_api, openai_api
from tests.fakes.provider import TEST_KEY, ask


def _calls(openai_client, anthropic_client) -> list[str]:
    out = [openai_client.chat.completions.create(model="m", messages=ask("hi")).model_dump_json()]
    stream = openai_client.chat.completions.create(model="m", messages=ask("hi"), stream=True)
    out.append("".join(c.model_dump_json() for c in stream))
    with anthropic_client.messages.stream(model="m", max_tokens=5, messages=ask("q")) as events:
        out.append("".join(e.model_dump_json() for e in events))
    return out


def test_a_text_cassette_replays_offline_from_the_file_alone(tmp_path):
    stubs = openai_api.upstream(), anthropic_api.upstream()
    clients = openai_api.openai_client(stubs[0]), anthropic_api.anthropic_client(stubs[1])
    path = tmp_path / "cassettes" / "chat.json"
    with pyrula.cassette("chat", path=path, store=tmp_path / "cache"):
        live = _calls(*clients)
    text = path.read_text()
    assert TEST_KEY not in text  # scrubbed as the store is
    document = json.loads(text)
    replies = [entry["reply"] for entry in document["exchanges"]]
    assert sorted(next(iter(r)) for r in replies) == ["frames", "frames", "json"]
    assert '"data: [DONE]\\n\\n"' in [line.strip() for line in text.splitlines()]  # a frame a line
    # Another checkout: the file only, a new cache, the stand-ins out of reach.
    with pyrula.cassette("chat", mode="none", path=path, store=tmp_path / "other-cache"):
        assert _calls(*clients) == live
    assert [len(stub.seen) for stub in stubs] == [2, 1]


def test_the_file_is_deterministic_and_rewritten_only_by_recording(tmp_path):
    client = openai_api.openai_client(openai_api.upstream())
    path = tmp_path / "c.json"
    with pyrula.cassette("det", path=path, store=tmp_path / "cache"):
        client.chat.completions.create(model="m", messages=ask("a"))
        client.chat.completions.create(model="m", messages=ask("b"))
    first = path.read_bytes()
    with Store(tmp_path / "cache") as store:
        cassette_file.save(store, "det", path)
    assert path.read_bytes() == first
    before = path.stat().st_mtime_ns
    with pyrula.cassette("det", mode="none", path=path, store=tmp_path / "cache"):
        client.chat.completions.create(model="m", messages=ask("a"))
    assert path.stat().st_mtime_ns == before


def _exchange(body: bytes, streamed: bool, frames: list[bytes] | None = None) -> Exchange:
    return Exchange(
        request_doc={"surface": "generic", "compared": {"q": body.hex()[:8]}, "meta": {}},
        surface="generic",
        fingerprint="ab" * 32,
        method="POST",
        url="http://x.test/",
        status=200,
        headers=[("content-type", "text/event-stream" if streamed else "application/json")],
        frames=frames or [body],
        streamed=streamed,
        elapsed_ms=1.0,
        namespace="bytes",
    )


@pytest.mark.parametrize(
    ("frames", "streamed", "kind"),
    [
        ([b'{"a":1,"b":[true,null]}'], False, "json"),
        ([b'{"a": 1, "b": "\\u00e9"}'], False, "json"),
        ([b'{\n  "a": 1\n}\n'], False, "lines"),
        ([b'{"a":  1}'], False, "lines"),
        ([b"\xff\x00binary"], False, "base64"),
        ([b"data: 1\r\n\r\n", b"\xff\xfe", b"data: [DONE]\n\n"], True, "frames"),
    ],
)
def test_every_reply_body_comes_back_byte_for_byte(tmp_path, frames, streamed, kind):
    path = tmp_path / "bytes.json"
    with Store(tmp_path / "cache") as store:
        key = cassette_key("bytes", "ab" * 32, 0)
        Exchanges(store).put(key, _exchange(b"".join(frames), streamed, frames))
        cassette_file.save(store, "bytes", path)
    (entry,) = json.loads(path.read_text())["exchanges"]
    assert kind in entry["reply"]
    with Store(tmp_path / "fresh") as fresh:
        assert cassette_file.sync(fresh, "bytes", path) is True
        record, page = Exchanges(fresh).get(key)  # type: ignore[misc]
        expected = frames if streamed else [b"".join(frames)]
        assert list(Exchanges(fresh).frames(record, page)) == expected


def test_the_cache_is_rebuilt_only_when_the_files_digest_changes(tmp_path):
    client = openai_api.openai_client(openai_api.upstream())
    path = tmp_path / "c.json"
    with pyrula.cassette("cache", path=path, store=tmp_path / "cache"):
        client.chat.completions.create(model="m", messages=ask("a"))
    with Store(tmp_path / "cache") as store:
        assert cassette_file.sync(store, "cache", path) is False  # just written: current
        edited = path.read_text().replace('\\"Pong.\\"', '\\"Edited.\\"')
        path.write_text(edited)
        assert cassette_file.sync(store, "cache", path) is True
        assert cassette_file.sync(store, "cache", path) is False
    with pyrula.cassette("cache", mode="none", path=path, store=tmp_path / "cache"):
        reply = client.chat.completions.create(model="m", messages=ask("a"))
    assert "Edited." in reply.choices[0].message.content
    path.unlink()  # deleting the file empties the cassette
    with Store(tmp_path / "cache") as store:
        assert cassette_file.sync(store, "cache", path) is True
        assert list(Exchanges(store).scan(namespace_prefix("cache"))) == []


def _reads_of(path, monkeypatch) -> list[str]:
    """The reads of `path` made from now on (an unchanged file's open should make none)."""
    reads: list[str] = []
    real = type(path).read_bytes

    def counted(self):
        if self == path:
            reads.append(str(self))
        return real(self)

    monkeypatch.setattr(type(path), "read_bytes", counted)
    return reads


def _age(path, seconds: int = 3600) -> None:
    """Set the file's mtime back, as a checkout made an hour ago leaves it."""
    then = path.stat().st_mtime_ns - seconds * 1_000_000_000
    os.utime(path, ns=(then, then))


def test_a_settled_unchanged_file_opens_without_being_read(tmp_path, monkeypatch):
    client = openai_api.openai_client(openai_api.upstream())
    path = tmp_path / "c.json"
    with pyrula.cassette("settled", path=path, store=tmp_path / "cache"):
        client.chat.completions.create(model="m", messages=ask("a"))
    _age(path)
    reads = _reads_of(path, monkeypatch)
    with Store(tmp_path / "cache") as store:
        assert cassette_file.sync(store, "settled", path) is False  # read and hashed: the same
        assert len(reads) == 1
        for _ in range(3):
            assert cassette_file.sync(store, "settled", path) is False
        assert len(reads) == 1  # its stat vouched for it
    with pyrula.cassette("settled", mode="none", path=path, store=tmp_path / "cache"):
        client.chat.completions.create(model="m", messages=ask("a"))
    assert len(reads) == 1


def test_a_file_changed_within_its_timestamp_tick_is_still_read(tmp_path, monkeypatch):
    client = openai_api.openai_client(openai_api.upstream())
    path = tmp_path / "c.json"
    with pyrula.cassette("racy", path=path, store=tmp_path / "cache"):
        client.chat.completions.create(model="m", messages=ask("a"))
    reads = _reads_of(path, monkeypatch)
    with Store(tmp_path / "cache") as store:
        # Just written: a change in the same tick would leave the stat as it is, so it is
        # never trusted; every open reads the file until it has settled.
        assert cassette_file.sync(store, "racy", path) is False
        assert cassette_file.sync(store, "racy", path) is False
        assert len(reads) == 2


def test_an_edit_that_keeps_size_and_mtime_is_seen(tmp_path):
    client = openai_api.openai_client(openai_api.upstream())
    path = tmp_path / "c.json"
    with pyrula.cassette("kept", path=path, store=tmp_path / "cache"):
        client.chat.completions.create(model="m", messages=ask("a"))
    _age(path)
    with Store(tmp_path / "cache") as store:
        assert cassette_file.sync(store, "kept", path) is False  # settled and noted
        mtime = path.stat().st_mtime_ns
        edited = path.read_text().replace('\\"Pong.\\"', '\\"Pang.\\"')  # the same size
        assert edited != path.read_text()
        path.write_text(edited)
        os.utime(path, ns=(mtime, mtime))  # as `cp -p` or `touch -r` leave it
        assert cassette_file.sync(store, "kept", path) is True  # its ctime moved
    with pyrula.cassette("kept", mode="none", path=path, store=tmp_path / "cache"):
        reply = client.chat.completions.create(model="m", messages=ask("a"))
    assert "Pang." in reply.choices[0].message.content


def test_a_damaged_file_is_a_typed_error_naming_it_and_the_fix(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"pyrula_cassette": 1, "exchanges": [{"fingerprint": "zz"}]}')
    with (
        pytest.raises(CassetteFileError, match=r"c\.json.*exchange 0.*record-mode=once"),
        pyrula.cassette("bad", mode="none", path=path, store=tmp_path / "cache"),
    ):
        pass
    path.write_text("<<<<<<< HEAD\n")
    with (
        pytest.raises(CassetteFileError, match="not JSON"),
        pyrula.cassette("bad", mode="none", path=path, store=tmp_path / "cache"),
    ):
        pass


def test_an_unrecorded_text_cassette_misses_with_the_record_advice(tmp_path):
    client = openai_api.openai_client(openai_api.upstream())
    with (
        pytest.raises(pyrula.ReplayMiss, match=r"never recorded.*mode='once'"),
        pyrula.cassette("new", mode="none", path=tmp_path / "n.json", store=tmp_path / "cache"),
    ):
        client.chat.completions.create(model="m", messages=ask("a"))
    assert not (tmp_path / "n.json").exists()
