"""A framework's nox leg fails loudly when its package is missing (its variable set); elsewhere
that framework's tests are not collected."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.agents.integrations import conftest

NOXFILE = Path(__file__).parents[3] / "noxfile.py"


@pytest.mark.parametrize("variable", sorted(conftest.FRAMEWORKS))
def test_a_leg_missing_its_framework_fails_instead_of_skipping(monkeypatch, variable):
    modules, files = conftest.FRAMEWORKS[variable]
    monkeypatch.setitem(sys.modules, modules[0], None)  # as if not installed
    for name in conftest.FRAMEWORKS:
        monkeypatch.delenv(name, raising=False)
    assert set(files) <= set(conftest.ignored())  # no leg of its own: not collected
    monkeypatch.setenv(variable, "1")
    refused = f"{variable} is set, but this leg is missing {modules[0]}"
    with pytest.raises(ImportError, match=refused):
        conftest.ignored()
    assert f'"{variable}": "1"' in NOXFILE.read_text()  # the leg that installs it sets it
