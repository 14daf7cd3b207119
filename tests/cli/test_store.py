"""`pyrula store`: check (damage, and what stopped processes left in their logs), copy, migrate;
`pyrula journal export` on a store with a damaged exchange."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pyrula.cli.app import app
from pyrula.errors import StoreFull
from pyrula.journal import Exchanges, Store
from pyrula.journal.lmdb_store import LmdbStore
from pyrula.journal.pending import DIRECT_RECORDINGS
from pyrula.journal.pg_schema import SCHEMA_VERSION
from pyrula.runtime import RunStore, fact_log, submit
from tests.cli.support import Invoke
from tests.fakes.postgres import fresh_url
from tests.journal import _worker
from tests.runtime.support import kill_worker_at
from tests.runtime.worker_app import FAST_HANG_AT

ENV = {"PYRULA_STORE": None, "COLUMNS": "160"}


def _store(*args: str):
    return CliRunner().invoke(app, ["store", *args], env=ENV)


def _damage_one_reply(path: Path) -> str:
    """Flip one byte inside the reply of the `Pong?` exchange (in the record, not its header);
    return its record id."""
    with Store(path) as store:
        exchanges = Exchanges(store)
        for key, record in exchanges.scan():
            found = exchanges.get(key)
            assert found is not None
            if b"Pong?" in exchanges.body(*found):
                value = bytearray(
                    store.write(lambda txn, k=key: bytes(txn.get(k, db=store.exchanges_db)))
                )
                value[-10] ^= 0x01
                store.write(lambda txn, k=key, v=bytes(value): txn.put(k, v, db=store.exchanges_db))
                return record.id
    raise AssertionError("no Pong? exchange")


def test_check_of_a_sound_store_finds_nothing(store: Path) -> None:
    result = _store("check", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert "4 exchanges" in result.output and "no damage found" in result.output


def test_check_lists_a_damaged_reply_and_a_damaged_request_part(store: Path) -> None:
    _damage_one_reply(store)
    with Store(store) as opened:
        with opened.read() as txn:
            digest, part = next(iter(txn.cursor(db=opened.blobs_db)))
            digest, part = bytes(digest), bytes(part)
        opened.write(lambda txn: txn.put(digest, part + b" ", db=opened.blobs_db))
    result = _store("check", "--store", str(store), "--json")
    assert result.exit_code == 1
    found = json.loads(result.output)
    assert found["exchanges"] == 4
    reasons = {item["reason"] for item in found["damaged"]}
    assert any("checksum does not match" in r for r in reasons)
    assert [i["damaged"] for i in found["damaged"]].count("blob") == 1
    assert any("does not match its digest" in r and "record " in r for r in reasons)
    text = _store("check", "--store", str(store))
    assert "cassette 'chat', request" in text.output and "3 damaged" in text.output


def test_export_leaves_out_a_damaged_exchange_exports_the_rest_and_says_so(
    store: Path, journal: Invoke, tmp_path: Path
) -> None:
    _damage_one_reply(store)
    out = tmp_path / "out.jsonl"
    result = journal("export", "--store", str(store), "-o", str(out))
    assert result.exit_code == 1
    assert "damaged, not exported" in result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    assert not any("Pong?" in line for line in lines)
    # What was exported imports cleanly into a new store.
    imported = journal("import", str(out), "--store", str(tmp_path / "new"))
    assert imported.exit_code == 0, imported.output


def test_copy_moves_a_whole_store_to_postgresql_and_back_byte_for_byte(
    store: Path, tmp_path: Path, journal: Invoke
) -> None:
    with Store(store) as opened:
        runs = RunStore(opened)
        run, _ = runs.submit("copied", {"n": 1}, idempotency_key="once")
        runs.append(run.id, None, "step:done", {"result": 2})
    url = fresh_url()
    back = tmp_path / "back"

    there = _store("copy", str(store), url, "--json")
    again = _store("copy", str(store), url)
    home = _store("copy", url, str(back), "--json")

    assert there.exit_code == 0, there.output
    copied = json.loads(there.stdout)["copied"]
    assert copied["exchanges"] == 4 and copied["runs"] == 1 and copied["tokens"] == 1
    assert again.exit_code == 1 and "already holds" in again.output
    assert home.exit_code == 0, home.output
    assert json.loads(home.stdout)["copied"] == copied
    original = journal("export", "--store", str(store)).stdout
    assert journal("export", "--store", url).stdout == original
    assert journal("export", "--store", str(back)).stdout == original
    with Store(url) as on_pg:
        assert [e.payload for e in RunStore(on_pg).events(run.id)][-1] == {"result": 2}
        assert RunStore(on_pg).submit("copied", {"n": 1}, idempotency_key="once")[0].id == run.id
    for where in (url, str(back)):
        stats = json.loads(_store("stats", "--store", where, "--json").stdout)
        assert stats["entries"]["exchanges"] == 4 and stats["entries"]["events"] == 2


def test_migrate_initialises_an_empty_database_and_names_its_schema() -> None:
    url = fresh_url()

    result = _store("migrate", url, "--json")
    again = _store("migrate", url)
    folder = _store("migrate", "./somewhere")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["schema"] == SCHEMA_VERSION
    assert again.exit_code == 0 and f"schema {SCHEMA_VERSION}" in again.stdout
    assert folder.exit_code == 1 and "not a postgresql:// URL" in folder.output


# -- what stopped processes left in their logs -------------------------------------------------


def _leave_logs(store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Two killed processes' logs in `store_path`: a worker's logged run facts (SIGKILLed
    mid-run) and a recording process's pending recordings (SIGKILLed inside its cassette
    block). Returns the run's id."""
    monkeypatch.setenv("PYRULA_TEST_NO_TIMED_FOLD", "1")
    effects, hang_file = tmp_path / "effects", tmp_path / "hang"
    effects.touch()
    hang_file.touch()
    with Store(store_path) as store:
        run_id = submit("fast_steps", str(effects), str(hang_file), store=store).id
    kill_worker_at(store_path, effects, FAST_HANG_AT)
    # Last: a process that opens the store to record takes stopped workers' logs in.
    _worker.kill_while_recording(store_path, DIRECT_RECORDINGS + 3, "sk-x")
    return run_id


def _steps_in_tables(where: str, run_id: str) -> int:
    with Store(where, readonly=True) as opened:  # a reader takes no log in
        return sum(1 for e in RunStore(opened).events(run_id) if e.type == "step:done")


@pytest.mark.slow
def test_check_counts_what_stopped_processes_left_in_logs_and_copy_takes_it_along(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "source"
    run_id = _leave_logs(source, tmp_path, monkeypatch)
    pending_logs = list((source / "pending").glob("*.log"))
    fact_logs = list((source / "facts").glob("*.log"))
    assert len(pending_logs) == len(fact_logs) == 1
    waiting_recordings = 3  # the block's recordings past its first DIRECT_RECORDINGS
    logged_steps = FAST_HANG_AT - fact_log.DIRECT_FACTS

    checked = _store("check", "--store", str(source), "--json")
    assert checked.exit_code == 0, checked.output
    waiting = json.loads(checked.stdout)["waiting"]
    assert waiting["recordings"] == waiting_recordings
    assert waiting["run_facts"] == logged_steps + 1  # with the attempt's `run:attempt`
    text = _store("check", "--store", str(source))
    assert f"waiting in logs: {waiting_recordings} recording(s)" in text.output
    # A check reads only: the logs are still there, their facts not in the tables.
    assert list((source / "pending").glob("*.log")) == pending_logs
    assert list((source / "facts").glob("*.log")) == fact_logs
    assert _steps_in_tables(str(source), run_id) == fact_log.DIRECT_FACTS

    target = tmp_path / "target"
    copied = _store("copy", str(source), str(target), "--json")
    assert copied.exit_code == 0, copied.output
    assert json.loads(copied.stdout)["not_taken_in"] is None
    assert json.loads(copied.stdout)["copied"]["exchanges"] == DIRECT_RECORDINGS + 3
    assert _steps_in_tables(str(target), run_id) == FAST_HANG_AT
    assert not list((source / "pending").glob("*.log"))
    assert not list((source / "facts").glob("*.log"))
    after = json.loads(_store("check", "--store", str(source), "--json").stdout)
    assert after["waiting"] == {"recordings": 0, "run_facts": 0}


@pytest.mark.slow
def test_copy_from_a_source_that_cannot_take_its_logs_in_says_what_the_copy_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "source"
    _leave_logs(source, tmp_path, monkeypatch)
    real_write = LmdbStore.write

    def full_source(self: LmdbStore, fn: Any, **scope: Any) -> Any:
        if Path(self.location) == source:  # the source's disk is full: it takes in nothing
            raise StoreFull(self.location, 0, "mdb_txn_commit: No space left on device")
        return real_write(self, fn, **scope)

    monkeypatch.setattr(LmdbStore, "write", full_source)
    copied = _store("copy", str(source), str(tmp_path / "target"), "--json")
    assert copied.exit_code == 0, copied.output
    assert "No space left" in json.loads(copied.stdout)["not_taken_in"]
    assert "are not in the copy" in copied.stderr and "copy again" in copied.stderr
    assert len(list((source / "facts").glob("*.log"))) == 1  # kept for the next opener
