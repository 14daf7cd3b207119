"""`pyrula store check`, and `pyrula journal export` on a store with a damaged exchange."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pyrula.cli.app import app
from pyrula.journal import Exchanges, Store
from pyrula.journal.pg_schema import SCHEMA_VERSION
from pyrula.runtime import RunStore
from tests.cli.support import Invoke
from tests.fakes.postgres import fresh_url

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
