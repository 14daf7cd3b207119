"""The library's boundaries, read from its imports: they stay as the architecture draws them.

- A drop-in or integration (`pyrula.agents...`) sees the runtime through `pyrula.runtime.calls`
  and the public `pyrula.runtime` package only.
- No module imports a `_private` name (or module) of another package.
- Imports go one way: fingerprints -> journal -> transport -> runtime -> agents; the proxy uses
  fingerprints, journal and transport only; the demo uses the library, not the CLI.
- No library module is over 500 lines (the demo's stand-in server aside).
- No one-letter module aliases.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("pyrula", "fingerprints", "proxy")
MAX_LINES = 500
LONGER_ALLOWED = {"pyrula/demo/standin.py"}

# Private names still imported across packages (none: the last went with issue 11's merge).
NOT_YET: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module, dotted
    target: str  # the imported module or name, dotted
    line: int
    alias: str | None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(dotted: str) -> bool:
    return (ROOT / Path(*dotted.split(".")) / "__init__.py").exists()


def _module_of(target: str) -> str:
    """The module `target` names, or the module it is a name of."""
    path = ROOT / Path(*target.split("."))
    if _is_package(target) or path.with_suffix(".py").exists():
        return target
    return target.rpartition(".")[0]


def _files(*tops: str) -> Iterator[Path]:
    for top in tops:
        yield from sorted((ROOT / top).rglob("*.py"))


def _imports(path: Path) -> Iterator[Import]:
    importer = _module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for name in node.names:
                yield Import(importer, name.name, node.lineno, name.asname)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for name in node.names:
                yield Import(importer, f"{base}.{name.name}", node.lineno, name.asname)


def _library_imports() -> list[Import]:
    return [i for path in _files(*LIBRARY) for i in _imports(path)]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _private_owner(target: str) -> str | None:
    """The package a `_private` part of `target` belongs to, else None."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__") and i > 0:
            owner = ".".join(parts[:i])
            return owner if _is_package(owner) else owner.rpartition(".")[0]
    return None


def test_drop_ins_see_the_runtime_through_calls_only() -> None:
    allowed = {"pyrula.runtime", "pyrula.runtime.calls"}
    found = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in _library_imports()
        if _within(i.importer, "pyrula.agents")
        and _within(i.target, "pyrula.runtime")
        and _module_of(i.target) not in allowed
    ]
    assert found == []


def test_no_module_imports_another_packages_private_names() -> None:
    found = set()
    for i in _library_imports():
        owner = _private_owner(i.target)
        if owner is not None and owner.split(".")[0] in LIBRARY and not _within(i.importer, owner):
            found.add((i.importer, i.target))
    assert found - NOT_YET == set()


# (importer package, packages it must not import)
_ONE_WAY = [
    ("fingerprints", ("pyrula",)),
    ("pyrula.fingerprints", ("pyrula.journal", "pyrula.transport", "pyrula.runtime")),
    ("pyrula.journal", ("pyrula.transport", "pyrula.runtime", "pyrula.agents", "pyrula.cli")),
    ("pyrula.transport", ("pyrula.runtime", "pyrula.agents", "pyrula.cli", "pyrula.demo")),
    ("pyrula.runtime", ("pyrula.agents", "pyrula.cli", "pyrula.demo")),
    ("pyrula.agents", ("pyrula.cli", "pyrula.demo")),
    ("proxy", ("pyrula.runtime", "pyrula.agents", "pyrula.cli", "pyrula.demo")),
    ("pyrula.demo", ("pyrula.cli",)),
    ("pyrula.agents.compat._registry", ("pyrula.agents.compat.bedrock",)),
    ("pyrula.agents.compat._registry", ("pyrula.agents.compat.genai",)),
    # The web page and what it shares with the CLI sit beside the runtime, above the journal.
    ("pyrula.inspection", ("pyrula.agents", "pyrula.cli", "pyrula.demo", "pyrula.ui")),
    ("pyrula.ui", ("pyrula.agents", "pyrula.cli", "pyrula.demo", "pyrula.proxy")),
    ("pyrula.runtime", ("pyrula.inspection", "pyrula.ui")),
    ("pyrula.transport", ("pyrula.inspection", "pyrula.ui")),
    ("pyrula.journal", ("pyrula.inspection", "pyrula.ui")),
]


@pytest.mark.parametrize(("importer", "forbidden"), _ONE_WAY)
def test_imports_go_one_way(importer: str, forbidden: tuple[str, ...]) -> None:
    found = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in _library_imports()
        if _within(i.importer, importer) and any(_within(i.target, f) for f in forbidden)
    ]
    assert found == []


def test_no_library_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _files(*LIBRARY)
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert {p: n for p, n in long.items() if p not in LONGER_ALLOWED} == {}


def test_no_one_letter_module_aliases() -> None:
    found = [
        f"{i.importer}:{i.line} imports {i.target} as {i.alias}"
        for path in _files(*LIBRARY, "tests", "benchmarks")
        for i in _imports(path)
        if i.alias is not None and len(i.alias.lstrip("_")) == 1
    ]
    assert found == []


def test_the_ui_sees_the_runtime_through_its_public_package_only() -> None:
    found = [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in _library_imports()
        if _within(i.importer, "pyrula.ui")
        and _within(i.target, "pyrula.runtime")
        and _module_of(i.target) != "pyrula.runtime"
    ]
    assert found == []
