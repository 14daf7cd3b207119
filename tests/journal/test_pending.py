"""A cassette block's pending log (`pyrula.journal.pending`): recordings durable on return, put
in the store when the block ends, and recovered after the recording process is killed."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

import pyrula
from pyrula.errors import RecordRefused, StoreFull
from pyrula.journal import Exchanges, Store, pending
from pyrula.journal.pending import DIRECT_RECORDINGS
from tests.fakes.openai_api import openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream
from tests.fakes.store_faults import fail_writes
from tests.journal import _worker

SECRET = "sk-pending-log-secret-7f3a9c"


def _records(store_path: Path, prefix: bytes = b"") -> int:
    with Store(store_path) as store:
        return sum(1 for _ in Exchanges(store).scan(prefix))


def _offline(store_path: Path, name: str, calls: int) -> list[str]:
    """Replay `calls` questions of cassette `name` with no network; the provider must not be
    asked."""
    upstream = Upstream(OPENAI_LIB, _worker.answer)
    sdk = openai_client(upstream)
    with pyrula.cassette(name, mode="none", store=store_path):
        answers = [_worker.ask(sdk, f"q{i}") for i in range(calls)]
    assert upstream.calls == []
    return answers  # type: ignore[return-value]


@pytest.fixture
def no_timed_fold(monkeypatch):
    """For a test that counts what another opener sees while its block is open."""
    monkeypatch.setattr(pending, "FOLD_SECONDS", 3600.0)


@pytest.mark.usefixtures("no_timed_fold")
def test_a_blocks_recordings_past_its_first_are_in_the_store_when_it_ends(store_path):
    upstream = Upstream(OPENAI_LIB, _worker.answer)
    sdk = openai_client(upstream)
    with pyrula.cassette("batch", mode="once", store=store_path):
        for i in range(10):
            assert _worker.ask(sdk, f"q{i}") == f"answer to q{i}"
        # Another opener sees the block's direct commits, not yet its pending ones.
        assert _records(store_path) == DIRECT_RECORDINGS
        logs = list((store_path / "pending").glob("*.log"))
        assert len(logs) == 1
    assert _records(store_path) == 10
    assert list((store_path / "pending").glob("*.log")) == []  # deleted with its last block
    assert _offline(store_path, "batch", 10) == [f"answer to q{i}" for i in range(10)]


@pytest.mark.usefixtures("no_timed_fold")
def test_a_big_block_is_put_in_the_store_in_batches(store_path, monkeypatch):
    monkeypatch.setattr(pending, "FOLD_EVERY", 3)
    sdk = openai_client(Upstream(OPENAI_LIB, _worker.answer))
    with pyrula.cassette("batches", mode="once", store=store_path):
        for i in range(DIRECT_RECORDINGS + 7):
            _worker.ask(sdk, f"q{i}")
        assert _records(store_path) == DIRECT_RECORDINGS + 6  # two batches of 3; 1 pending
    assert _records(store_path) == DIRECT_RECORDINGS + 7


@pytest.mark.usefixtures("no_timed_fold")
def test_a_batch_that_cannot_be_put_yet_fails_no_call(store_path, monkeypatch, caplog):
    monkeypatch.setattr(pending, "FOLD_EVERY", 3)
    store = Store(store_path)
    refused = fail_writes(monkeypatch, store, where="PendingLog.fold", times=1)
    sdk = openai_client(Upstream(OPENAI_LIB, _worker.answer))
    calls = DIRECT_RECORDINGS + 5
    with pyrula.cassette("retried", mode="once", store=store):
        for i in range(calls):  # the third pending one meets the full disk, and returns
            assert _worker.ask(sdk, f"q{i}") == f"answer to q{i}"
    assert refused
    assert "wait for the next fold" in caplog.text
    monkeypatch.undo()
    store.close()
    assert _records(store_path) == calls


def test_a_pause_in_a_block_does_not_hide_its_recordings_for_long(store_path, monkeypatch):
    monkeypatch.setattr(pending, "FOLD_SECONDS", 0.5)
    sdk = openai_client(Upstream(OPENAI_LIB, _worker.answer))
    calls = DIRECT_RECORDINGS + 3
    with pyrula.cassette("pause", mode="once", store=store_path):
        for i in range(calls):
            _worker.ask(sdk, f"q{i}")
        last = time.monotonic()
        # The block pauses: its pending recordings reach the store without waiting for its end.
        deadline = last + 60
        while _records(store_path) < calls:
            assert time.monotonic() < deadline, "the pending recordings were never put"
            time.sleep(0.01)
        while time.monotonic() - last <= pending.FOLD_SECONDS:  # the pause outlasts it
            time.sleep(0.01)
        # A call that long after the one before is committed straight away: visible at once.
        _worker.ask(sdk, f"q{calls}")
        assert _records(store_path) == calls + 1
    assert _offline(store_path, "pause", calls + 1) == [f"answer to q{i}" for i in range(calls + 1)]


def test_recordings_that_come_slowly_are_committed_each_on_its_own(store_path, monkeypatch):
    # Calls further apart than FOLD_SECONDS (a real provider's seconds) would each be folded
    # alone: an append's flush more than a commit. Each is committed, visible when it returns.
    monkeypatch.setattr(pending, "FOLD_SECONDS", 0.0)
    sdk = openai_client(Upstream(OPENAI_LIB, _worker.answer))
    with pyrula.cassette("slow", mode="once", store=store_path):
        for i in range(DIRECT_RECORDINGS + 3):
            _worker.ask(sdk, f"q{i}")
            assert _records(store_path) == i + 1
        assert not list((store_path / "pending").glob("*.log"))


def _damage_none(data: bytes) -> bytes:
    return data


def _damage_torn_tail(data: bytes) -> bytes:
    """A half-written entry after the last whole one (a crash during its write)."""
    at = 16  # past the header; each entry is `u32 length | u32 CRC | payload`
    while (length := int.from_bytes(data[at : at + 4], "big")) != 0:
        at += 8 + length
    torn = (300).to_bytes(4, "big") + b"\xde\xad\xbe\xef" + b"\x55" * 40
    return data[:at] + torn + data[at + len(torn) :]


@pytest.mark.slow
@pytest.mark.parametrize("damage", [_damage_none, _damage_torn_tail], ids=["whole", "torn tail"])
def test_recordings_of_a_killed_process_are_recovered_and_replay_offline(store_path, damage):
    calls = DIRECT_RECORDINGS + 4
    _worker.kill_while_recording(store_path, calls, SECRET)
    (log,) = (store_path / "pending").glob("*.log")
    log.write_bytes(damage(log.read_bytes()))
    assert _offline(store_path, "killed", calls) == [f"answer to q{i}" for i in range(calls)]
    assert list((store_path / "pending").glob("*.log")) == []
    assert _records(store_path) == calls


@pytest.mark.slow
def test_a_log_whose_rename_a_crash_undid_is_recovered_not_swept(store_path):
    # Nothing flushes the folder for the rename of `*.new` to `*.log`: on some file systems a
    # crash can leave a log holding flushed entries under its first name, however long ago.
    calls = DIRECT_RECORDINGS + 3
    _worker.kill_while_recording(store_path, calls, SECRET)
    (log,) = (store_path / "pending").glob("*.log")
    undone = log.rename(log.with_suffix(".new"))
    an_hour_ago = time.time() - 3600
    os.utime(undone, (an_hour_ago, an_hour_ago))
    assert _offline(store_path, "killed", calls) == [f"answer to q{i}" for i in range(calls)]
    assert list((store_path / "pending").iterdir()) == []
    assert _records(store_path) == calls


@pytest.mark.slow
def test_a_pending_log_holds_no_secret(store_path):
    _worker.kill_while_recording(store_path, DIRECT_RECORDINGS + 3, SECRET)
    (log,) = (store_path / "pending").glob("*.log")
    assert len(list(pending.read_entries(log.read_bytes()))) == 3
    for path in store_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_log_of_another_format_is_ignored_not_applied(store_path):
    Store(store_path).close()
    folder = store_path / "pending"
    folder.mkdir()
    (folder / "1-foreign.log").write_bytes(b"not a pending log at all" * 100)
    assert _records(store_path) == 0
    assert list(folder.glob("*.log")) == []


def _questions(store_path: Path) -> list[str]:
    with Store(store_path) as store:
        exchanges = Exchanges(store)
        return sorted(
            exchanges.request(record)["compared"]["messages"][0]["content"]
            for _key, record in exchanges.scan()
        )


def _disk_full(fd: int, data: bytes, offset: int) -> int:
    raise OSError(28, "No space left on device")


def test_a_full_disk_under_the_log_is_store_full_and_loses_no_acknowledged_recording(
    store_path, monkeypatch
):
    upstream = Upstream(OPENAI_LIB, _worker.answer)
    http = upstream.http_client(journal={})
    url = "http://openai.test/v1/chat/completions"

    def post(question: str) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": question}]}
        http.post(url, json=body, headers={"authorization": "Bearer sk-unused"}).read()

    real_pwrite = os.pwrite
    with pyrula.cassette("full", mode="once", store=store_path):
        for i in range(DIRECT_RECORDINGS + 1):
            post(f"q{i}")
        monkeypatch.setattr(os, "pwrite", _disk_full)
        with pytest.raises(RecordRefused) as refused:  # inside the block: by name
            post("lost")
        assert isinstance(refused.value.error, StoreFull)
        assert re.search(r"pending log.*free some space", str(refused.value.error))
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        post(f"q{DIRECT_RECORDINGS + 1}")
    assert _questions(store_path) == [f"q{i}" for i in range(DIRECT_RECORDINGS + 2)]


@pytest.mark.parametrize("where", ["commit", "pending log"])
def test_a_full_disk_while_an_sdk_records_does_not_send_the_request_again(
    store_path, monkeypatch, where
):
    # openai 2.x (the httpx leg) reads a plain reply inside its retry loop: a bare StoreFull
    # there is retried, each retry sending the paid request again.
    upstream = Upstream(OPENAI_LIB, _worker.answer)
    sdk = openai_client(upstream, max_retries=2)
    store = Store(store_path)
    calls = 1 if where == "commit" else DIRECT_RECORDINGS + 1

    with pytest.raises(StoreFull), pyrula.cassette("sdk-full", mode="once", store=store):
        for i in range(calls - 1):
            _worker.ask(sdk, f"q{i}")
        if where == "commit":
            fail_writes(monkeypatch, store)
        else:
            monkeypatch.setattr(os, "pwrite", _disk_full)
        _worker.ask(sdk, "lost")
    monkeypatch.undo()
    assert len(upstream.calls) == calls  # once per call made, never once per SDK retry
    assert _questions(store_path) == [f"q{i}" for i in range(calls - 1)]
    store.close()


def test_a_block_whose_final_batch_meets_a_full_disk_keeps_it_for_the_next_opener(
    store_path, monkeypatch
):
    calls = DIRECT_RECORDINGS + 3
    store = Store(store_path)
    sdk = openai_client(Upstream(OPENAI_LIB, _worker.answer))
    fail_writes(monkeypatch, store, where="PendingLog.fold")
    with pytest.raises(StoreFull), pyrula.cassette("late", mode="once", store=store):
        for i in range(calls):
            _worker.ask(sdk, f"q{i}")
    monkeypatch.undo()
    store.close()
    assert len(list((store_path / "pending").glob("*.log"))) == 1  # the batch, kept on disk
    assert _records(store_path) == calls  # space is back: the next opener puts it in
    assert _offline(store_path, "late", calls) == [f"answer to q{i}" for i in range(calls)]


def test_a_log_left_half_made_is_deleted_once_it_is_old(store_path):
    # A process killed between creating its log and renaming it leaves an empty `*.new` file.
    Store(store_path).close()
    folder = store_path / "pending"
    folder.mkdir()
    old, fresh = folder / "1-old.new", folder / "2-fresh.new"
    old.touch()
    fresh.touch()
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert _records(store_path) == 0
    assert not old.exists()
    assert fresh.exists()  # perhaps a live process's, about to take its lock
