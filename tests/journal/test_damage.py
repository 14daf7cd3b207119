"""Damaged stores: every case either serves exactly what was written or raises a `StoreError`,
and none kills the process. Each case reads in its own process (`tests/journal/_damage.py`), so
a SIGBUS or a segfault shows up as a failed case instead of ending the test run."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lmdb
import pytest

from pyrula.errors import StoreCorrupt
from pyrula.journal import Exchange, Exchanges, Store

ROOT = Path(__file__).resolve().parents[2]
PAGE = 4096


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.journal._damage", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A store with six records (one over several frame pages) and what they hold."""
    folder = tmp_path_factory.mktemp("damage")
    store = folder / "store"
    done = _run("write", str(store))
    assert done.returncode == 0, done.stderr
    expected = folder / "expected.json"
    expected.write_text(done.stdout)
    return store, expected


def _damaged(written, tmp_path, name, change):
    store, _expected = written
    copy = tmp_path / name
    shutil.copytree(store, copy)
    data = bytearray((copy / "data.mdb").read_bytes())
    (copy / "data.mdb").write_bytes(bytes(change(data)))
    return copy


def _read(written, copy) -> dict:
    done = _run("read", str(copy), str(written[1]))
    assert done.returncode == 0, f"{copy.name}: the reader died ({done.returncode}): {done.stderr}"
    return json.loads(done.stdout)


def _check(name: str, outcome: dict) -> list[str]:
    """What is wrong with one case's outcome: wrong bytes served, or an untyped error."""
    problems = [f"{name}: served wrong data for {outcome['wrong']}"] if outcome["wrong"] else []
    problems += [f"{name}: {error}" for error in outcome["errors"] if error.startswith("UNTYPED")]
    return problems


def _suite(written, tmp_path, cases) -> list[dict]:
    copies = [(name, _damaged(written, tmp_path, name, change)) for name, change in cases]
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda item: _read(written, item[1]), copies))
    problems = [
        problem
        for (name, _), outcome in zip(copies, outcomes, strict=True)
        for problem in _check(name, outcome)
    ]
    assert problems == []
    return outcomes


def test_the_undamaged_store_serves_every_record(written, tmp_path):
    outcome = _read(written, _damaged(written, tmp_path, "same", lambda data: data))
    assert outcome == {"exact": 6, "wrong": [], "missing": 0, "errors": []}


@pytest.mark.parametrize("length", [0, 8 * 1024, 12 * 1024, "half", "one page short"])
def test_a_truncated_data_file_is_refused_naming_it(written, tmp_path, length):
    def cut(data):
        keep = {"half": len(data) // 2, "one page short": len(data) - PAGE}.get(length, length)
        return data[:keep]

    copy = _damaged(written, tmp_path, "cut", cut)
    outcome = _read(written, copy)
    assert outcome["exact"] == 0 and len(outcome["errors"]) == 1
    assert outcome["errors"][0].startswith("typed StoreCorrupt")
    assert str(copy / "data.mdb") in outcome["errors"][0]


@pytest.mark.parametrize("length", [0, 8 * 1024, 12 * 1024, "half", "one page short"])
def test_a_data_file_cut_while_the_store_is_open_raises_instead_of_killing(
    written, tmp_path, length
):
    copy = _damaged(written, tmp_path, "open", lambda data: data)
    size = (copy / "data.mdb").stat().st_size
    keep = {"half": size // 2, "one page short": size - PAGE}.get(length, length)
    done = _run("cut", str(copy), str(written[1]), str(keep))
    # Before the check, the first read past the new end killed the reader with SIGBUS (-7).
    assert done.returncode == 0, f"the reader died ({done.returncode}): {done.stderr}"
    outcome = json.loads(done.stdout)
    assert outcome["exact"] == 0 and outcome["wrong"] == []
    assert outcome["errors"], "the cut file was read as if whole"
    for error in outcome["errors"]:
        assert error.startswith("typed StoreCorrupt") and "truncated while open" in error
        assert str(copy / "data.mdb") in error


def test_runs_ls_on_a_truncated_store_reports_it_and_exits(written, tmp_path):
    copy = _damaged(written, tmp_path, "cut", lambda data: data[: 12 * 1024])
    done = subprocess.run(
        [sys.executable, "-m", "pyrula.cli.app", "runs", "ls", "--store", str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "truncated" in done.stderr + done.stdout


def test_flipped_bits_anywhere_are_served_exactly_or_refused(written, tmp_path):
    size = (written[0] / "data.mdb").stat().st_size
    rng = random.Random(22)
    positions = sorted(rng.randrange(size * 8) for _ in range(20))

    def flip(position):
        def change(data):
            data[position // 8] ^= 1 << (position % 8)
            return data

        return change

    outcomes = _suite(written, tmp_path, [(f"bit{p}", flip(p)) for p in positions])
    assert any(outcome["errors"] for outcome in outcomes)  # some flips did land in data


def test_flipped_bits_inside_reply_bytes_are_refused_not_served(written, tmp_path):
    """A flip in a reply's own bytes (found by searching the file for a recorded frame) is the
    case that used to be served as data."""
    expected = json.loads(written[1].read_text())
    data = (written[0] / "data.mdb").read_bytes()

    cases = []
    for name, body in expected.items():
        frame = base64.b64decode(body)[:1000]
        # LMDB copies pages on write, so stale copies may sit in free pages: flip every copy.
        copies = list(_occurrences(data, frame))
        assert copies, name

        def change(data, copies=copies):
            for at in copies:
                data[at + 500] ^= 0x10
            return data

        cases.append((f"in-{name}", change))
    outcomes = _suite(written, tmp_path, cases)
    for (name, _change), outcome in zip(cases, outcomes, strict=True):
        assert outcome["exact"] == 5, name
        assert outcome["errors"], name
        assert all(e.startswith("typed StoreCorrupt") for e in outcome["errors"]), outcome
        assert b"case-".hex() in outcome["errors"][-1], outcome  # names the damaged record


def _occurrences(data: bytes, part: bytes):
    at = data.find(part)
    while at >= 0:
        yield at
        at = data.find(part, at + 1)


def test_random_pages_are_served_exactly_or_refused(written, tmp_path):
    pages = (written[0] / "data.mdb").stat().st_size // PAGE

    def scramble(page):
        def change(data):
            data[page * PAGE : (page + 1) * PAGE] = random.Random(page).randbytes(PAGE)
            return data

        return change

    _suite(written, tmp_path, [(f"page{p}", scramble(p)) for p in range(0, pages, 3)])


@pytest.mark.parametrize(
    ("marker", "value", "error"),
    [
        ("magic", b"someone-else", "typed NotAStore"),
        ("format", b"99", "typed StoreFormatError"),
        ("format", b"one", "typed NotAStore"),
    ],
)
def test_foreign_and_newer_markers_are_refused(written, tmp_path, marker, value, error):
    copy = tmp_path / "marked"
    shutil.copytree(written[0], copy)
    env = lmdb.open(str(copy), max_dbs=16)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(marker.encode(), value)
    env.close()
    outcome = _read(written, copy)
    assert [e.split(":")[0] for e in outcome["errors"]] == [error]


def _one_record(path):
    store = Store(path)
    exchanges = Exchanges(store)
    exchanges.put(
        b"k",
        Exchange(
            request_doc={"surface": "generic", "compared": {"text": "long " * 100}, "meta": {}},
            surface="generic",
            fingerprint="f" * 64,
            method="POST",
            url="http://x.test/",
            status=200,
            headers=[],
            frames=[b"{}"],
            streamed=False,
            elapsed_ms=1.0,
        ),
    )
    found = exchanges.get(b"k")
    assert found is not None
    return store, exchanges, found[0]


def test_a_request_part_that_does_not_match_its_digest_is_refused_naming_the_record(tmp_path):
    store, exchanges, record = _one_record(tmp_path / "s")
    with store.read() as txn:
        parts = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=store.blobs_db)]
    for key, value in parts:  # one flipped byte in every stored request part
        damaged = value[:-2] + b"?" + value[-1:]
        store.write(lambda txn, k=key, v=damaged: txn.put(k, v, db=store.blobs_db))
    with pytest.raises(StoreCorrupt, match=f"record {record.id}.*digest"):
        exchanges.request(record)
    store.close()


@pytest.mark.parametrize("db", ["blobs", "exchanges"])
def test_random_bytes_in_a_record_are_store_corrupt_not_a_decode_error(tmp_path, db):
    store, exchanges, _record = _one_record(tmp_path / "s")
    garbage = random.Random(1).randbytes(300) + b"\xff\xfe"
    with store.read() as txn:
        keys = [bytes(k) for k, _ in txn.cursor(db=store.db(db))]
    for key in keys:
        store.write(lambda txn, k=key: txn.put(k, garbage, db=store.db(db)))
    with pytest.raises(StoreCorrupt):
        found = exchanges.get(b"k")
        assert found is not None
        exchanges.request(found[0])
    store.close()


def test_a_file_grown_by_another_writer_mid_check_is_not_called_cut(tmp_path, monkeypatch):
    """The race CI hit: a reader's `stat` saw the file before another process's commit grew
    it, and its meta read saw the commit. The commit's pages are in the file by then."""
    from pyrula.journal import lmdb_file

    store = Store(tmp_path / "store")
    data = tmp_path / "store" / "data.mdb"
    watch = lmdb_file.LengthWatch(data)
    before = os.stat(data)
    for index in range(40):  # another writer grows the file by many pages
        store.write(lambda txn, i=index: txn.put(b"k%d" % i, b"x" * 8192, db=store.db("exchanges")))
    assert data.stat().st_size > before.st_size
    real_stat = os.stat

    def stale_stat(path, *args, **kwargs):  # what the reader's `stat` saw before the commits
        return before if Path(path) == data else real_stat(path, *args, **kwargs)

    monkeypatch.setattr(lmdb_file.os, "stat", stale_stat)
    assert watch.shortfall() is None
    assert lmdb_file.missing_bytes(data) is None
    store.close()
