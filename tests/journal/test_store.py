"""Opening stores: new, reopened, foreign, corrupt, newer; growing the map; the size cap."""

from __future__ import annotations

import hashlib

import lmdb
import pytest
from pyrula.fingerprints import canonical_json

from pyrula.errors import NotAStore, PayloadTooLarge, StoreCorrupt, StoreError, StoreFormatError
from pyrula.journal import Exchange, Exchanges, Store
from pyrula.journal.lmdb_store import STORE_FORMAT


def _put(exchanges: Exchanges, key: bytes, body: bytes) -> None:
    exchanges.put(
        key,
        Exchange(
            request_doc={"surface": "generic", "compared": {"k": key.hex()}, "meta": {}},
            surface="generic",
            fingerprint=hashlib.sha256(key).hexdigest(),
            method="POST",
            url="http://x.test/",
            status=200,
            headers=[("content-type", "application/json")],
            frames=[body],
            streamed=False,
            elapsed_ms=1.0,
        ),
    )


def _files(path):
    return {p.name: p.read_bytes() for p in path.iterdir()}


def test_new_store_is_created_and_reopens(tmp_path):
    path = tmp_path / "s"
    with Store(path) as store:
        _put(Exchanges(store), b"k1", b"{}")
    with Store(path) as store:
        found = Exchanges(store).get(b"k1")
    assert found is not None and found[0].status == 200


def test_a_foreign_lmdb_environment_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "foreign"
    env = lmdb.open(str(path))
    with env.begin(write=True) as txn:
        txn.put(b"hello", b"world")
    env.close()
    before = _files(path)
    with pytest.raises(NotAStore, match="not a Pyrula store"):
        Store(path)
    assert _files(path) == before


def test_a_damaged_data_file_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "broken"
    path.mkdir()
    (path / "data.mdb").write_bytes(b"this is not lmdb" * 100)
    before = _files(path)
    with pytest.raises(StoreCorrupt, match="restore it"):
        Store(path)
    assert _files(path) == before


def test_a_store_of_a_newer_format_is_refused(tmp_path):
    path = tmp_path / "newer"
    Store(path).close()
    env = lmdb.open(str(path), max_dbs=16)
    meta = env.open_db(b"meta")
    with env.begin(write=True, db=meta) as txn:
        txn.put(b"format", str(STORE_FORMAT + 1).encode())
    env.close()
    with pytest.raises(StoreFormatError, match="upgrade pyrula"):
        Store(path)


def test_a_non_empty_folder_or_a_file_is_not_a_store(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(NotAStore, match="non-empty folder"):
        Store(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    with pytest.raises(NotAStore, match="is a file"):
        Store(tmp_path / "notes.txt")


def test_the_map_grows_when_full_and_nothing_is_lost(tmp_path):
    path = tmp_path / "small"
    with Store(path, map_size=256 * 1024, sync=False) as store:
        exchanges = Exchanges(store)
        for i in range(300):
            _put(exchanges, f"k{i}".encode(), bytes([i % 251]) * 3000)
        assert store.env.info()["map_size"] > 256 * 1024
    with Store(path) as store:
        exchanges = Exchanges(store)
        for i in range(300):
            record, page = exchanges.get(f"k{i}".encode())  # type: ignore[misc]
            assert exchanges.body(record, page) == bytes([i % 251]) * 3000


def test_a_record_over_the_cap_raises_and_names_the_fix(tmp_path):
    with Store(tmp_path / "cap", max_record_bytes=10_000) as store:
        with pytest.raises(PayloadTooLarge, match="max_record_bytes") as error:
            _put(Exchanges(store), b"big", b"x" * 20_000)
        assert error.value.cap == 10_000
        assert Exchanges(store).get(b"big") is None


def test_the_cap_counts_the_frames_and_the_request_documents_canonical_json(tmp_path):
    doc = {"surface": "generic", "compared": {"k": "626967"}, "meta": {}}  # as `_put` writes
    size = len(b"x" * 5_000) + len(canonical_json(doc))
    with Store(tmp_path / "cap", max_record_bytes=size) as store:
        _put(Exchanges(store), b"big", b"x" * 5_000)  # exactly at the cap: recorded
        with pytest.raises(PayloadTooLarge) as error:
            _put(Exchanges(store), b"big", b"x" * 5_001)
        assert error.value.size == size + 1
        assert Exchanges(store).get(b"big") is not None


def test_a_reply_larger_than_a_page_replays_frame_by_frame(tmp_path):
    frames = [bytes([i]) * 40_000 for i in range(10)]
    with Store(tmp_path / "pages") as store:
        exchanges = Exchanges(store)
        exchanges.put(
            b"k",
            Exchange(
                request_doc={"compared": {}},
                surface="generic",
                fingerprint="0" * 64,
                method="POST",
                url="http://x.test/",
                status=200,
                headers=[],
                frames=frames,
                streamed=True,
                elapsed_ms=0,
            ),
        )
        record, first = exchanges.get(b"k")  # type: ignore[misc]
        assert record.pages > 1
        assert list(exchanges.frames(record, first)) == frames


def test_the_cap_takes_the_specs_name_beside_todays(tmp_path, monkeypatch):
    with Store(tmp_path / "a", max_event_payload_bytes=5_000_000) as store:
        assert store.max_record_bytes == 5_000_000
    monkeypatch.setenv("PYRULA_MAX_EVENT_PAYLOAD_BYTES", "4200000")
    with Store(tmp_path / "b") as store:
        assert store.max_record_bytes == 4_200_000


def test_the_cap_error_says_how_to_raise_it_for_multimodal_replies(tmp_path):
    with Store(tmp_path / "cap") as store, pytest.raises(PayloadTooLarge) as caught:
        _put(Exchanges(store), b"image", b"x" * 2_600_000)  # an image-generation reply
    message = str(caught.value)
    assert "max_event_payload_bytes" in message and "multimodal" in message


def test_a_store_used_after_close_says_so_not_that_it_is_damaged(tmp_path):
    # "damaged; restore it from a copy" for a handle the caller closed would send a user to
    # replace a healthy store.
    store = Store(tmp_path / "closed")
    store.close()
    with pytest.raises(StoreError, match="was closed; open it again") as raised:
        store.write(lambda txn: txn.put(b"k", b"v", db=store.meta_db))
    assert not isinstance(raised.value, StoreCorrupt)
    with pytest.raises(StoreError, match="was closed"), store.read() as txn:
        txn.get(b"k", db=store.meta_db)
    with Store(tmp_path / "closed") as reopened:  # nothing was harmed
        reopened.write(lambda txn: txn.put(b"k", b"v", db=reopened.meta_db))
