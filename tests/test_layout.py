"""The suite's own layout: tests mirror the source packages, and no test module imports another.

Shared pieces live in `tests/fakes/` (the stand-in providers) or in a folder's `support.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
ROOT = TESTS.parent
# Where each package's source lies (pyproject's package-dir).
SOURCES = {name: ROOT / name for name in ("pyrula", "proxy", "fingerprints")}
NOT_MIRRORS = {"fakes", "node", "__pycache__"}


def _imported(path: Path) -> set[str]:
    """Every module `path` imports, with `from X import Y` giving both X and X.Y."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import"
            module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for module in _imported(path):
            parts = module.split(".")
            if parts[0] == "tests" and parts[-1].startswith("test_"):
                offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert offenders == []


def test_every_test_folder_mirrors_a_source_package():
    folders = [
        path.relative_to(TESTS)
        for path in sorted(TESTS.rglob("*"))
        if path.is_dir() and not NOT_MIRRORS & set(path.relative_to(TESTS).parts)
    ]
    assert folders
    for folder in folders:
        top, *rest = folder.parts
        source = SOURCES.get(top, SOURCES["pyrula"] / top)
        assert source.joinpath(*rest).is_dir(), f"tests/{folder} mirrors no source package"


def test_fakes_need_nothing_from_the_tests():
    for path in sorted((TESTS / "fakes").glob("*.py")):
        for module in _imported(path):
            if module.startswith("tests."):
                assert module.startswith("tests.fakes"), f"{path.name} imports {module}"
