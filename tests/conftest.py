from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def _postgres_servers_stop():
    """The throwaway PostgreSQL servers stop with the session (`tests.fakes.postgres`)."""
    yield
    import sys

    fakes = sys.modules.get("tests.fakes.postgres")  # loaded only where a test used it
    if fakes is not None:
        fakes.stop_servers()


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store"


# Every store test and the runtime's conformance tests run on each backend named here (both by
# default; a CI leg may narrow it). PostgreSQL is a real server: tests/fakes/postgres.py.
BACKENDS = os.environ.get("PYRULA_TEST_BACKENDS", "lmdb,postgresql").split(",")


@pytest.fixture(params=BACKENDS)
def store_location(request, tmp_path):
    """A location for a new store: a folder (LMDB) or a URL of an empty PostgreSQL schema."""
    if request.param == "lmdb":
        return str(tmp_path / "store")
    from tests.fakes.postgres import fresh_url

    return fresh_url()


@pytest.fixture(params=BACKENDS)
def each_backend(request):
    """Run the test with `tests.runtime.support.new_store` opening stores of one backend."""
    from tests.runtime import support

    support.BACKEND["name"] = request.param
    yield request.param
    support.BACKEND["name"] = "lmdb"
    while support.OPENED:
        support.OPENED.pop().close()


@pytest.fixture
def sample_project(pytester, monkeypatch):
    """A `pytester` project whose test runs import this repository's `tests.fakes` (in-process
    and in subprocesses), with no `PYRULA_STORE` from the environment: text cassettes."""
    root = str(Path(__file__).parents[1])
    monkeypatch.syspath_prepend(root)
    monkeypatch.setenv("PYTHONPATH", root)
    monkeypatch.delenv("PYRULA_STORE", raising=False)
    return pytester
