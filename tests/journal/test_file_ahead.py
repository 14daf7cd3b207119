"""A text cassette's file catches up with its cache after the recording process was killed:
the recordings it committed, folded, or left pending reach the file at the cassette's next
opening, even over a file that changed meanwhile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pyrula
from pyrula.journal import Store, file_ahead
from pyrula.journal.pending import DIRECT_RECORDINGS
from tests.fakes.openai_api import openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream
from tests.journal import _worker

SECRET = "sk-file-ahead-secret-51d0"


def _questions_in(path: Path) -> list[str]:
    document = json.loads(path.read_text())
    return sorted(e["request"]["compared"]["messages"][0]["content"] for e in document["exchanges"])


def _offline(store: Path, path: Path, questions: list[str]) -> list[str | None]:
    """Replay those questions of the killed block's cassette with no network."""
    upstream = Upstream(OPENAI_LIB, _worker.answer)
    sdk = openai_client(upstream)
    with pyrula.cassette("killed", mode="none", store=store, path=path):
        answers = [_worker.ask(sdk, q) for q in questions]
    assert upstream.calls == []
    return answers


@pytest.mark.slow
@pytest.mark.parametrize("fold_every", [None, 2], ids=["left pending", "folded before the kill"])
def test_a_killed_blocks_recordings_reach_its_file_at_the_next_opening(tmp_path, fold_every):
    calls = DIRECT_RECORDINGS + 5
    path, store = tmp_path / "cassettes" / "killed.json", tmp_path / "cache"
    _worker.kill_while_recording(store, calls, SECRET, path=path, fold_every=fold_every)
    assert not path.exists()  # the block never ended: its file was never written
    questions = [f"q{i}" for i in range(calls)]
    assert _offline(store, path, questions) == [f"answer to {q}" for q in questions]
    assert _questions_in(path) == sorted(questions)
    assert SECRET not in path.read_text()
    # The file alone, in another checkout, replays them all.
    assert _offline(tmp_path / "other-cache", path, questions) == [
        f"answer to {q}" for q in questions
    ]


@pytest.mark.slow
def test_over_a_file_changed_meanwhile_both_are_kept(tmp_path):
    calls = DIRECT_RECORDINGS + 3
    path, store = tmp_path / "killed.json", tmp_path / "cache"
    # The file as committed before: one recording ("earlier"), made in another checkout.
    sdk = openai_client(Upstream(OPENAI_LIB, _worker.answer))
    with pyrula.cassette("killed", mode="once", store=tmp_path / "elsewhere", path=path):
        _worker.ask(sdk, "earlier")
    committed = path.read_bytes()
    path.unlink()
    _worker.kill_while_recording(store, calls, SECRET, path=path)
    path.write_bytes(committed)  # a `git pull` brings it in before the next run
    questions = ["earlier"] + [f"q{i}" for i in range(calls)]
    assert _offline(store, path, questions) == [f"answer to {q}" for q in questions]
    assert _questions_in(path) == sorted(questions)


def test_a_file_written_from_the_cache_leaves_nothing_noted(tmp_path):
    path, store_path = tmp_path / "c.json", tmp_path / "cache"
    sdk = openai_client(Upstream(OPENAI_LIB, _worker.answer))
    with pyrula.cassette("c", mode="once", store=store_path, path=path):
        for i in range(DIRECT_RECORDINGS + 2):
            _worker.ask(sdk, f"q{i}")
    with Store(store_path) as store, store.read() as txn:
        assert file_ahead.keys_ahead(txn, store.meta_db, "c") == []
    before = path.stat().st_mtime_ns
    with pyrula.cassette("c", mode="none", store=store_path, path=path):
        _worker.ask(sdk, "q0")
    assert path.stat().st_mtime_ns == before  # nothing to catch up: not written again
