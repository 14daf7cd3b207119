"""The two key layouts of the `exchanges` database: a cassette's by content, a run's by position."""

from __future__ import annotations

from pyrula.journal.keys import (
    cassette_key,
    namespace_prefix,
    run_key,
    run_prefix,
    split_key,
)

FINGERPRINT = "ab" * 32


def test_a_cassette_key_splits_back_into_its_parts():
    key = cassette_key("tests/test_x.py::test_y", FINGERPRINT, 7)
    assert split_key(key) == ("tests/test_x.py::test_y", FINGERPRINT, 7)


def test_a_cassettes_prefix_selects_it_and_no_cassette_whose_name_extends_it():
    assert cassette_key("story", FINGERPRINT, 0).startswith(namespace_prefix("story"))
    assert not cassette_key("story-2", FINGERPRINT, 0).startswith(namespace_prefix("story"))


def test_a_runs_calls_sort_by_scope_then_index_under_its_own_prefix():
    keys = [run_key("run-1", "main", 2), run_key("run-1", "main", 0), run_key("run-1", "main", 1)]
    assert sorted(keys) == [run_key("run-1", "main", i) for i in range(3)]
    assert all(k.startswith(run_prefix("run-1")) for k in keys)
    assert not run_key("run-10", "main", 0).startswith(run_prefix("run-1"))
    assert not run_key("run-1", "main", 0).startswith(namespace_prefix("run-1"))
