"""A store is created only where something will be recorded; a missing one names its path."""

from __future__ import annotations

import lmdb
import pytest

from pyrula import cassette
from pyrula.errors import NotAStore, StoreCorrupt, StoreNotFound
from pyrula.journal.store import Store, open_store


def test_open_store_without_create_refuses_a_missing_folder(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(StoreNotFound, match=str(missing)):
        open_store(missing, create=False)
    assert not missing.exists()


def test_a_replay_only_cassette_does_not_create_a_store(tmp_path):
    missing = tmp_path / "mistyped"
    with pytest.raises(StoreNotFound) as caught, cassette("c", "none", store=missing):
        pass
    assert str(missing) in str(caught.value)
    assert "--pyrula-record-mode=once" in str(caught.value)
    assert not missing.exists()


def test_a_recording_cassette_creates_its_store(tmp_path):
    target = tmp_path / "new"
    with cassette("c", "once", store=target):
        pass
    assert (target / "data.mdb").exists()


def test_a_non_numeric_format_marker_is_a_foreign_store(tmp_path):
    path = tmp_path / "s"
    Store(path).close()
    env = lmdb.open(str(path), max_dbs=16)
    meta = env.open_db(b"meta")
    with env.begin(write=True, db=meta) as txn:
        txn.put(b"format", b"one")
    env.close()
    with pytest.raises(NotAStore, match="did not write"):
        Store(path)


def test_damage_found_while_reading_is_a_typed_error_naming_the_store(tmp_path):
    store = Store(tmp_path / "s")
    with pytest.raises(StoreCorrupt, match=str(tmp_path / "s")), store.read():
        raise lmdb.CorruptedError("mdb_get: MDB_CORRUPTED: Located page was wrong type")
    store.close()
