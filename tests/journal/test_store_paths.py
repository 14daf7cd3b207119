"""A store is created only where something will be recorded; a missing one names its path; a
path holding something else (a folder for a data file, a pipe, a file in the way) is refused
with a typed error naming the fix, the same from the Python API and the CLI, changing nothing."""

from __future__ import annotations

import os
from pathlib import Path

import lmdb
import pytest
from typer.testing import CliRunner

from pyrula import cassette
from pyrula.cli.app import app
from pyrula.errors import NotAStore, StoreCorrupt, StoreError, StoreNotFound
from pyrula.journal.store import Store, open_store

CLI_ENV = {"PYRULA_STORE": None, "COLUMNS": "400"}


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


def _tree(root: Path) -> dict[str, object]:
    """Everything under `root` as it lies: each file's bytes, each link's target, each folder."""
    found: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_dir():
            found[name] = "folder"
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = "special"
    return found


def _data_folder(store: Path) -> None:
    (store / "data.mdb").mkdir(parents=True)


def _data_pipe(store: Path) -> None:
    store.mkdir()
    os.mkfifo(store / "data.mdb")  # opening it for reading would block


def _data_link_to_nothing(store: Path) -> None:
    store.mkdir()
    (store / "data.mdb").symlink_to(store.parent / "moved-away.mdb")


def _data_empty(store: Path) -> None:
    store.mkdir()
    (store / "data.mdb").write_bytes(b"")


def _data_not_lmdb(store: Path) -> None:
    store.mkdir()
    (store / "data.mdb").write_bytes(b"these are my notes, not a database\n" * 200)


def _store_is_a_file(store: Path) -> None:
    store.write_text("mine")


def _lock_folder(store: Path) -> None:
    Store(store).close()
    (store / "lock.mdb").unlink()
    (store / "lock.mdb").mkdir()


# (what is at the store's path, the error, words of the message: what is wrong, then the fix)
FOREIGN = [
    (_data_folder, NotAStore, ["data.mdb is a folder", "move it away", "PYRULA_STORE"]),
    (_data_pipe, NotAStore, ["data.mdb is not a regular file", "move it away"]),
    (_data_link_to_nothing, NotAStore, ["moved-away.mdb, which does not exist", "restore"]),
    (_data_empty, StoreCorrupt, ["data.mdb is empty (0 bytes)", "restore it from a copy"]),
    (_data_not_lmdb, StoreCorrupt, ["not a readable LMDB file", "restore it from a copy"]),
    (_store_is_a_file, NotAStore, ["is a file, not a store folder", "point PYRULA_STORE"]),
    (_lock_folder, StoreError, ["LMDB could not open", "lock.mdb", "can be deleted"]),
]


@pytest.mark.parametrize(("make", "error", "words"), FOREIGN, ids=[f[0].__name__ for f in FOREIGN])
def test_a_store_that_is_not_one_is_a_typed_error_naming_the_fix_and_nothing_changes(
    tmp_path, make, error, words
):
    store = tmp_path / "s"
    make(store)
    before = _tree(tmp_path)
    for create in (True, False):
        with pytest.raises(error) as raised:
            Store(store, create=create)
        assert type(raised.value) is error  # not a subclass saying something else (corrupt)
        message = str(raised.value)
        assert str(store) in message
        assert all(word in message for word in words), message
        assert _tree(tmp_path) == before
    # The CLI shows the same error, in one line.
    shown = CliRunner().invoke(app, ["journal", "ls", "--store", str(store)], env=CLI_ENV)
    assert shown.exit_code == 1
    assert shown.output == f"error: {message}\n"


def test_a_file_in_the_way_of_a_new_store_is_a_typed_error_keeping_the_cause(tmp_path):
    (tmp_path / "notes").write_text("mine")
    with pytest.raises(NotAStore) as raised:
        Store(tmp_path / "notes" / "s")
    message = str(raised.value)
    assert f"cannot use {tmp_path / 'notes'}" in message and "a file is in the way" in message
    assert isinstance(raised.value.__cause__, OSError)
    assert (tmp_path / "notes").read_text() == "mine"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file whatever its mode")
def test_a_store_this_user_cannot_read_is_a_typed_error_naming_the_permissions(tmp_path):
    store = tmp_path / "s"
    Store(store).close()
    (store / "data.mdb").chmod(0)
    try:
        with pytest.raises(StoreError, match="chmod") as raised:
            Store(store)
        assert not isinstance(raised.value, StoreCorrupt)
        assert isinstance(raised.value.__cause__, PermissionError)
    finally:
        (store / "data.mdb").chmod(0o644)
