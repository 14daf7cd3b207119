"""The pytest plugin (auto-loaded): each marked test runs inside its own cassette.

    @pytest.mark.pyrula                 # cassette named after the test
    @pytest.mark.pyrula(name="shared", mode="new_episodes")
    def test_x(pyrula_cassette): ...    # the fixture activates one too, and hands it over

`--pyrula-record-mode` sets the mode for the run (default `none`: replay only, network blocked).
At the end the plugin lists recordings no test used (and, after a run where every test passed,
prunes them with `--pyrula-prune-unused`), leaving out a cassette some test of which did not run
(`pytest_usage`), and flags recordings older than `--pyrula-max-age` days. Workers of
pytest-xdist share one store and its text cassettes safely; the controller reports on what all
of them used.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from pyrula.cassette import MODES, Cassette, Mode
from pyrula.errors import StoreNotFound
from pyrula.journal import cassette_file
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import namespace_prefix
from pyrula.journal.store import Store, is_url, open_store
from pyrula.pytest_failures import set_fixes, short_report
from pyrula.pytest_usage import WIRE, Usage, Used

# Each case's live budget and the summary of its live spend load with this plugin.
pytest_plugins = ("pyrula.pytest_budget",)

_STATE = pytest.StashKey["_PluginState"]()


class _PluginState:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.mode = cast(Mode, config.getoption("pyrula_record_mode"))
        store = (
            config.getoption("pyrula_store")
            or config.getini("pyrula_store")
            or os.environ.get("PYRULA_STORE")
        )
        # Without a store named, each test's recordings are a text file in the repository and
        # the store under the root is only their cache (git-ignored). A named store is a folder
        # (resolved against the working directory) or a postgresql:// URL as given.
        self.text = not store
        location = store or config.rootpath / ".pyrula"
        self.store_path: Path | str = location if is_url(location) else Path(location)
        folder = config.getoption("pyrula_cassette_dir") or config.getini("pyrula_cassette_dir")
        self.cassette_dir = config.rootpath / folder if folder else None
        max_age = config.getoption("pyrula_max_age") or config.getini("pyrula_max_age_days")
        self.max_age_days = float(max_age) if max_age else None
        self.prune = bool(config.getoption("pyrula_prune_unused"))
        self.vcr_markers = bool(
            config.getoption("pyrula_vcr_markers") or config.getini("pyrula_vcr_markers")
        )
        self.cassettes: list[Cassette] = []
        self.usage = Usage()
        self._store: Store | None = None

    def note_used(self) -> None:
        """Put in `usage` the recordings this process's cassettes used."""
        for cassette in self.cassettes:
            self.usage.cassettes[cassette.name].keys.update(cassette.stats.used)

    @property
    def store(self) -> Store:
        """The store, which must exist in replay-only mode (a mistyped path is an error)."""
        return self.open_store(create=self.mode != "none")

    @property
    def opened(self) -> Store | None:
        """The store if a cassette opened it (a replay-only run may have found none)."""
        return self._store

    def open_store(self, *, create: bool) -> Store:
        if self._store is None:
            try:
                self._store = open_store(self.store_path, create=create or self.text)
                if self.text:
                    cassette_file.ignore_cache(Path(self.store_path))
            except StoreNotFound as exc:
                raise StoreNotFound(
                    exc.path,
                    "this run replays only; record with --pyrula-record-mode=once, or fix "
                    "--pyrula-store / the pyrula_store ini option / PYRULA_STORE",
                ) from None
        return self._store


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pyrula", "record and replay model calls")
    group.addoption(
        "--pyrula-record-mode",
        choices=MODES,
        default=os.environ.get("PYRULA_RECORD_MODE", "none"),
        help="cassette mode for marked tests (default: none, replay only)",
    )
    group.addoption(
        "--pyrula-store", default=None, help="store folder or postgresql:// URL (default ./.pyrula)"
    )
    group.addoption(
        "--pyrula-max-age", default=None, help="flag recordings older than this many days"
    )
    group.addoption(
        "--pyrula-prune-unused",
        action="store_true",
        default=False,
        help="delete recordings of the tests that ran which no test used",
    )
    group.addoption(
        "--pyrula-cassette-dir",
        default=None,
        help="folder of text cassettes (default: cassettes/ beside each test module)",
    )
    group.addoption(
        "--pyrula-vcr-markers",
        action="store_true",
        default=False,
        help="treat @pytest.mark.vcr tests as @pytest.mark.pyrula (after pyrula import-vcr)",
    )
    parser.addini(
        "pyrula_vcr_markers", "honour @pytest.mark.vcr markers", type="bool", default=False
    )
    parser.addini("pyrula_store", "store folder for recordings", default="")
    parser.addini(
        "pyrula_cassette_dir", "folder of text cassettes, relative to the root", default=""
    )
    parser.addini("pyrula_max_age_days", "flag recordings older than this many days", default="")


def cassette_path(item: pytest.Item, name: str | None, folder: Path | None) -> Path:
    """Where a test's text cassette lives: `<folder>/<module>/<test>.json`, the folder being
    `cassettes/` beside the test module unless given (pytest-recording's layout)."""
    base = folder if folder is not None else item.path.parent / "cassettes"
    test = name or item.nodeid.split("::", 1)[-1].replace("::", ".")
    return base / item.path.stem / (_SAFE.sub("-", test) + cassette_file.SUFFIX)


_SAFE = re.compile(r"[^A-Za-z0-9_.,=\[\]-]")


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "pyrula(name=None, mode=None, live_budget_usd=None): run the test inside a pyrula "
        "cassette (named after the test unless given); live_budget_usd caps what it may spend "
        "on live model calls",
    )
    config.stash[_STATE] = _PluginState(config)


def _marker(
    item: pytest.Item, state: _PluginState
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The arguments of the test's `pyrula` marker; none for a `vcr` marker when
    `--pyrula-vcr-markers` honours those (a project moving from vcrpy: vcrpy's own options do
    not apply); None when the test has neither."""
    found = item.get_closest_marker("pyrula")
    if found is not None:
        return found.args, dict(found.kwargs)
    if state.vcr_markers and item.get_closest_marker("vcr") is not None:
        return (), {}
    return None


def _identity(item: pytest.Item, state: _PluginState) -> tuple[str, Path | None, bool] | None:
    """The name of the test's cassette, its text file (or None) and whether the marker named it
    (so other tests may share it); None for a test without one."""
    if _marker(item, state) is None and "pyrula_cassette" not in getattr(item, "fixturenames", ()):
        return None
    args, kwargs = _marker(item, state) or ((), {})
    given = kwargs.get("name") or (args[0] if args else None)
    if not state.text:
        return given or item.nodeid, None, given is not None
    path = cassette_path(item, given, state.cassette_dir)
    return _relative(path, item.config.rootpath), path, given is not None


def _cassette_for(item: pytest.Item, state: _PluginState) -> Cassette:
    kwargs = (_marker(item, state) or ((), {}))[1]
    mode = kwargs.get("mode") or state.mode
    store = state.open_store(create=mode != "none")
    name, path, named = _identity(item, state) or (item.nodeid, None, False)
    cassette = Cassette(
        name, mode, store=store, allow_hosts=kwargs.get("allow_hosts", ()), path=path
    )
    # Re-recorded by one of its tests, a shared cassette keeps the other tests' recordings: the
    # summary lists those no test made again, for --pyrula-prune-unused.
    cassette.drops_stale = not named
    set_fixes(cassette, item)
    state.cassettes.append(cassette)
    state.usage.enter(name, Used(mode, None if path is None else str(path), named))
    return cassette


def pytest_collection_finish(session: pytest.Session) -> None:
    """Count the tests collected to run each cassette (`pytest_usage`)."""
    state: _PluginState = session.config.stash[_STATE]
    for item in session.items:
        found = _identity(item, state)
        if found is not None:
            state.usage.expected[found[0]] += 1


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Note the cassettes a deselected test uses: their recordings are not all used this run."""
    for item in items:
        state: _PluginState = item.config.stash[_STATE]
        found = _identity(item, state)
        if found is not None:
            state.usage.deselected.add(found[0])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a pytest-xdist worker: hand the controller what its tests used."""
    state: _PluginState = session.config.stash[_STATE]
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        state.note_used()
        output[WIRE] = state.usage.to_wire()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the pytest-xdist controller: add up what a worker's tests used."""
    wire = getattr(node, "workeroutput", {}).get(WIRE)
    if wire is not None:
        node.config.stash[_STATE].usage.add_wire(wire)


@pytest.fixture
def pyrula_cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """The test's cassette, active for the whole test."""
    state: _PluginState = request.config.stash[_STATE]
    active = request.node.stash.get(_ACTIVE, None)
    if active is not None:
        yield active
        return
    cassette = _cassette_for(request.node, state)
    with cassette:
        yield cassette


_ACTIVE = pytest.StashKey[Cassette]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    state: _PluginState = item.config.stash[_STATE]
    if _marker(item, state) is None or "pyrula_cassette" in getattr(item, "fixturenames", ()):
        return (yield)
    cassette = _cassette_for(item, state)
    item.stash[_ACTIVE] = cassette
    with cassette:
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.excinfo is not None and (
        item.stash.get(_ACTIVE, None) is not None
        or "pyrula_cassette" in getattr(item, "fixturenames", ())
    ):
        short = short_report(item, call.excinfo)
        if short is not None:
            report.longrepr = short
    return report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state: _PluginState | None = config.stash.get(_STATE, None)
    if state is None or not state.usage.cassettes or hasattr(config, "workeroutput"):
        return  # (a pytest-xdist worker's summary is its controller's)
    state.note_used()
    store = state.opened
    if store is None:  # the pytest-xdist controller: its workers opened it
        try:
            store = state.open_store(create=False)
        except StoreNotFound:
            return
    exchanges = Exchanges(store)
    unused: list[tuple[bytes, str]] = []
    stale: list[tuple[str, float]] = []
    now = time.time()
    usage = state.usage
    for name, used in usage.cassettes.items():
        if used.mode not in ("none", "once", "new_episodes") and not (
            used.mode == "all" and used.named
        ):
            continue
        whole = usage.whole(name)  # else a test not run may use what looks unused
        for key, record in exchanges.scan(namespace_prefix(name)):
            if whole and key not in used.keys:
                unused.append((key, name))
            if state.max_age_days and now - record.recorded_at > state.max_age_days * 86400:
                stale.append((name, (now - record.recorded_at) / 86400))
    if not unused and not stale:
        return
    terminalreporter.section("pyrula")
    if unused:
        verb = "pruned" if state.prune and exitstatus == 0 else "unused"
        terminalreporter.write_line(f"{len(unused)} recording(s) {verb}:")
        for name in sorted({name for _, name in unused}):
            count = sum(1 for _, n in unused if n == name)
            terminalreporter.write_line(f"  {name}: {count}")
        if exitstatus == 0 and state.prune:
            for name in {name for _, name in unused}:
                path = usage.cassettes[name].path
                owner = Cassette(name, store=store, path=path)
                owner.prune(key for key, n in unused if n == name)
        elif exitstatus == 0:
            terminalreporter.write_line("  (delete them with --pyrula-prune-unused)")
        else:
            # A failing test may not have reached its calls, and a replay miss is compared with
            # these: deleting them now could lose what the user needs to re-record or compare.
            verb = "not pruned" if state.prune else "kept"
            terminalreporter.write_line(
                f"  ({verb}: some tests failed, and a replay miss compares with these; "
                "--pyrula-prune-unused deletes only on a run where every test passes)"
            )
    if stale:
        terminalreporter.write_line(
            f"{len(stale)} recording(s) older than {state.max_age_days:g} days; "
            "re-record them with --pyrula-record-mode=all:"
        )
        for name in sorted({name for name, _ in stale}):
            oldest = max(age for n, age in stale if n == name)
            terminalreporter.write_line(f"  {name}: oldest {oldest:.0f} days")
