"""What the docs tests share: the pages they read and whether a test id names a real test."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).parents[1]


def pages() -> list[Path]:
    """README.md and every page of docs/, read at test time (the README is rewritten often)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@functools.cache
def _tests_in(path: Path) -> frozenset[str]:
    """`name` and `Class::name` of every test function in the module at `path`."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(node.name)
        elif isinstance(node, ast.ClassDef):
            found.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return frozenset(name for name in found if name.rsplit("::", 1)[-1].startswith("test"))


def known_test(test_id: str) -> bool:
    """Whether `tests/x.py::test_y` (a parameter set `[...]` allowed) is a test in this tree."""
    module, _, name = test_id.partition("::")
    path = ROOT / module
    if not name or not module.startswith("tests/") or not path.is_file():
        return False
    return name.split("[", 1)[0] in _tests_in(path)
