from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pyrula.demo.standin import StandIn


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"
