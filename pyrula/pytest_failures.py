"""How the pytest plugin reports a replay refusal: a few lines a person can act on.

A `ReplayMiss` or `NetworkBlocked` is raised deep inside the SDK's send, so pytest's own report
is a traceback through the SDK and the transport (about a hundred lines) that says nothing the
message does not. The plugin replaces it with the line of the test that made the call, the
refusal's message (the nearest recording and the fields that differ) and a fix that names this
test: `--tb=long` or `--full-trace` keeps pytest's own report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pyrula.cassette import Cassette
from pyrula.errors import NetworkBlocked, OfflineViolation


def set_fixes(cassette: Cassette, item: pytest.Item) -> None:
    """Give `cassette` the fixes of a replay miss in this test, each a command that selects it."""
    select = selector(item)
    cassette.unrecorded_fix = f"Record this test with `{select} --pyrula-record-mode=once`."
    cassette.miss_fix = (
        f"If the change is intended, re-record this test: `{select} --pyrula-record-mode=all`."
    )
    cassette.repeat_fix = (
        f"If the extra call is intended, record it: `{select} --pyrula-record-mode=new_episodes`."
    )


def selector(item: pytest.Item) -> str:
    """`pytest FILE -k NAME`: the command line that runs this test (all its parameters)."""
    name = getattr(item, "originalname", None) or item.name
    try:
        where = item.path.relative_to(item.config.invocation_params.dir)
    except ValueError:
        where = item.path
    return f"pytest {where.as_posix()} -k {name}"


def refusal_in(error: BaseException | None) -> OfflineViolation | None:
    """The replay refusal `error` is, or carries (as a cause, context or group member)."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OfflineViolation):
            return current
        pending += [current.__cause__, current.__context__]
        pending += list(getattr(current, "exceptions", ()))
    return None


def short_report(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> str | None:
    """The few lines that replace pytest's report of a replay refusal, or None to keep it."""
    option = item.config.option
    if getattr(option, "fulltrace", False) or getattr(option, "tbstyle", "auto") == "long":
        return None
    refusal = refusal_in(excinfo.value)
    if refusal is None:
        return None
    lines = [f"{type(refusal).__name__}: {refusal}"]
    site = _test_line(item, excinfo)
    if site:
        lines.append(f"  at {site}")
    if isinstance(refusal, NetworkBlocked):
        lines.append(
            "A request left through a client without Pyrula's transport, or this test was never "
            f"recorded: `{selector(item)} --pyrula-record-mode=once` records it."
        )
    return "\n".join(lines)


def _test_line(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> str | None:
    """`path:line: source` of the last frame in the test's own file."""
    test_file = Path(str(item.path))
    for entry in reversed(excinfo.traceback):
        if Path(str(entry.path)) == test_file:
            source = entry.statement.lines[0].strip() if entry.statement.lines else ""
            return f"{item.path.name}:{entry.lineno + 1}: {source}"
    return None
