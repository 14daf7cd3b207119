"""Packages made absent, as if not installed: importing one (or any module of it) fails as a
missing package's import does, with a `ModuleNotFoundError` naming it.

`refuse("botocore")` does it for the rest of a process (a fresh interpreter's); in a test,
`blocked(monkeypatch, "botocore")` does it until the test ends. A module already imported is
dropped from `sys.modules` meanwhile, so the next import of it asks the finder again.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from typing import Any


class Absent(importlib.abc.MetaPathFinder):
    """A finder, first on `sys.meta_path`, that refuses `names`."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def loaded(names: Sequence[str]) -> list[str]:
    """The imported modules that are one of `names` or inside one."""
    return [
        module
        for module in list(sys.modules)
        if any(module == name or module.startswith(f"{name}.") for name in names)
    ]


def refuse(*names: str) -> None:
    for module in loaded(names):
        del sys.modules[module]
    sys.meta_path.insert(0, Absent(names))


def blocked(monkeypatch: Any, *names: str) -> None:
    for module in loaded(names):
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(sys, "meta_path", [Absent(names), *sys.meta_path])
