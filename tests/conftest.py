from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def sample_project(pytester, monkeypatch):
    """A `pytester` project whose test runs import this repository's `tests.fakes` (in-process
    and in subprocesses), with no `PYRULA_STORE` from the environment: text cassettes."""
    root = str(Path(__file__).parents[1])
    monkeypatch.syspath_prepend(root)
    monkeypatch.setenv("PYTHONPATH", root)
    monkeypatch.delenv("PYRULA_STORE", raising=False)
    return pytester
