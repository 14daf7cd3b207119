"""A test case's live budget, and what each case spent live (loaded with the pytest plugin).

    @pytest.mark.pyrula(live_budget_usd=0.05)   # this case may spend 5 cents on live calls
    --pyrula-live-budget=0.10                    # each case's budget where its marker sets none
    def test_x(pyrula_live_budget): ...          # the case's `LiveBudget`: `.spent`, `.max_usd`

Each test runs, from its setup to its teardown, inside a `LiveBudget` of its own
(`pyrula.runtime.live_budget`): a model call it sends live (recording a cassette, verifying,
or a run with nothing to replay) is held to the budget before it is sent and refused with
`LiveBudgetExceeded` past it; a replay spends nothing. At the end the run lists each case that
spent anything live, and the total; under pytest-xdist each worker's cases reach that list
through their reports (`user_properties`), so the controller prints them all.
"""

from __future__ import annotations

import math
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pyrula.runtime.live_budget import LiveBudget

__all__ = ["pyrula_live_budget"]

_LIVE = pytest.StashKey[LiveBudget]()
_PROBLEM = pytest.StashKey[str]()
# The properties a case's teardown report carries (also in a JUnit XML report).
_CALLS, _COST, _BUDGET, _UNPRICED = (
    "pyrula_live_calls",
    "pyrula_live_cost_usd",
    "pyrula_live_budget_usd",
    "pyrula_live_unpriced_calls",
)
_FIX = "raise it with @pytest.mark.pyrula(live_budget_usd=...) or --pyrula-live-budget"


@dataclass(frozen=True, slots=True)
class _Case:
    nodeid: str
    calls: int
    cost_usd: float
    budget_usd: float | None
    unpriced: int


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pyrula", "record and replay model calls")
    group.addoption(
        "--pyrula-live-budget",
        default=os.environ.get("PYRULA_LIVE_BUDGET"),
        metavar="USD",
        help="what each test may spend on live model calls, where its marker sets no "
        "live_budget_usd (default: no budget, spend is only reported)",
    )
    parser.addini(
        "pyrula_live_budget_usd", "each test's live spend budget in USD (default: none)", default=""
    )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker's cases go to the controller
        config.pluginmanager.register(_Spends(), "pyrula-live-spend")


def _budget_of(item: pytest.Item) -> tuple[float | None, str | None]:
    """The case's budget (its marker's `live_budget_usd`, else the run's), or why it is wrong."""
    marker = item.get_closest_marker("pyrula")
    given: Any = marker.kwargs.get("live_budget_usd") if marker is not None else None
    where = "@pytest.mark.pyrula(live_budget_usd=...)"
    if given is None:
        given = item.config.getoption("pyrula_live_budget") or item.config.getini(
            "pyrula_live_budget_usd"
        )
        where = "--pyrula-live-budget (or the pyrula_live_budget_usd ini option)"
    if given is None or given == "":
        return None, None
    try:
        value = float(given)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(given, bool) or not value >= 0 or math.isinf(value):
        return None, f"{where} is a cost in USD, 0 or more (0: replay only), not {given!r}"
    return value, None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    budget, problem = _budget_of(item)
    if problem is not None:
        item.stash[_PROBLEM] = problem
    with LiveBudget(budget, name=f"test {item.nodeid}", fix=_FIX) as live:
        item.stash[_LIVE] = live
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    problem = item.stash.get(_PROBLEM, None)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        live = item.stash.get(_LIVE, None)
        spent = live.spent if live is not None else None
        if live is not None and spent is not None and spent.calls:
            # Before the teardown report is made: it takes the item's properties with it.
            item.user_properties.extend(
                [(_CALLS, spent.calls), (_COST, spent.cost_usd), (_UNPRICED, spent.unpriced)]
            )
            if live.max_usd is not None:
                item.user_properties.append((_BUDGET, live.max_usd))


@pytest.fixture
def pyrula_live_budget(request: pytest.FixtureRequest) -> Generator[LiveBudget, None, None]:
    """The test's `LiveBudget`: what it has spent live so far (`spent`), its `max_usd`."""
    yield request.node.stash[_LIVE]


class _Spends:
    """What each case spent live, from its teardown report (its worker's, under xdist)."""

    def __init__(self) -> None:
        self.cases: list[_Case] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        found: dict[str, Any] = dict(report.user_properties)
        calls = found.get(_CALLS)
        if isinstance(calls, int) and calls > 0:
            budget = found.get(_BUDGET)
            self.cases.append(
                _Case(
                    report.nodeid,
                    calls,
                    float(found.get(_COST) or 0.0),
                    float(budget) if budget is not None else None,
                    int(found.get(_UNPRICED) or 0),
                )
            )

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        cases = self.cases
        # Calls no price was found for cost $0: a run that set no budget and spent nothing
        # priced (a suite over stand-ins, say) gets no section unless -v asks for it.
        priced = any(c.cost_usd > 0 or c.budget_usd is not None for c in cases)
        if not cases or not (priced or config.get_verbosity() > 0):
            return
        terminalreporter.section("pyrula live spend")
        listed = cases if config.get_verbosity() > 0 else _costliest(cases)
        for case in listed:
            spend = _spend(case.cost_usd, case.calls)
            terminalreporter.write_line(f"{case.nodeid}: {spend}{_of(case)}")
        if len(listed) < len(cases):
            more = len(cases) - len(listed)
            terminalreporter.write_line(f"... and {more} more case(s) (-v lists them all)")
        total_cost = sum(c.cost_usd for c in cases)
        total_calls = sum(c.calls for c in cases)
        count = f"{len(cases)} case" + ("s" if len(cases) != 1 else "")
        terminalreporter.write_line(f"total: {_spend(total_cost, total_calls)}, {count}")


# Without -v, the summary lists this many cases, the costliest first.
LISTED = 10


def _costliest(cases: list[_Case]) -> list[_Case]:
    if len(cases) <= LISTED:
        return cases
    return sorted(cases, key=lambda case: (-case.cost_usd, -case.calls))[:LISTED]


def _spend(cost: float, calls: int) -> str:
    return f"${cost:.4f} in {calls} live call" + ("s" if calls != 1 else "")


def _of(case: _Case) -> str:
    notes = []
    if case.budget_usd is not None:
        notes.append(f"budget ${case.budget_usd:.4f}")
    if case.unpriced:
        notes.append(f"{case.unpriced} unpriced, counted at $0")
    return f" ({', '.join(notes)})" if notes else ""
