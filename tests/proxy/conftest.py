from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyrula.demo.standin import StandIn
from tests.proxy.support import close_shared


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture(autouse=True, scope="module")
def _shared_clients_closed() -> Iterator[None]:
    yield
    close_shared()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"
