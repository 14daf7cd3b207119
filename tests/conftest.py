from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def store_path(tmp_path):
    return tmp_path / "store"
