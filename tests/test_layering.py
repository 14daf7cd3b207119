"""The library's boundaries, read from its imports: they stay as the architecture draws them.

- A drop-in or integration (`pyrula.agents...`) sees the runtime through `pyrula.runtime.calls`
  and the public `pyrula.runtime` package only.
- No module imports a `_private` name (or module) of another package.
- Imports go one way: fingerprints -> journal -> transport -> runtime -> agents; the proxy uses
  fingerprints, journal and transport only; the demo uses the library, not the CLI.
- No library module is over 500 lines (the demo's stand-in server aside).
- No one-letter module aliases.
- No import circle among a package's modules: a module a module imports (at module level or
  inside a function; a `TYPE_CHECKING` block aside) never imports it back, however indirectly.
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


def _imports(path: Path, *, run_time: bool = False) -> Iterator[Import]:
    """The imports of the module at `path`, wherever they are (`run_time`: but those inside
    `if TYPE_CHECKING:`)."""
    importer = _module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree) if run_time else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes inside `if TYPE_CHECKING:` blocks (imports for annotations only)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for part in node.body for n in ast.walk(part))
    return skipped


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


def _run_time_graph() -> dict[str, set[str]]:
    """Each pyrula module and the pyrula modules it imports when it runs (module level and
    inside functions), `TYPE_CHECKING` imports left out."""
    graph: dict[str, set[str]] = {}
    for path in _files("pyrula"):
        module = _module_name(path)
        targets = graph.setdefault(module, set())
        for i in _imports(path, run_time=True):
            target = _module_of(i.target)
            if target != module and _within(target, "pyrula"):
                targets.add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in graph:
                    continue
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle_and_only_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set(), "f": {"f"}}
    assert _circles(graph) == [["a", "b", "c"]]


# The packages whose modules must not import each other in a circle.
_NO_CIRCLES = ["pyrula.runtime", "pyrula.journal", "pyrula.transport"]


@pytest.mark.parametrize("package", _NO_CIRCLES)
def test_no_import_circle_among_a_packages_modules(package: str) -> None:
    circles = _circles(_run_time_graph())
    inside = [c for c in circles if any(_within(m, package) for m in c)]
    assert inside == [], f"import circles (all of pyrula's: {circles})"
