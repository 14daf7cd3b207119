"""A test case's live budget in pytest: `@pytest.mark.pyrula(live_budget_usd=...)` and
`--pyrula-live-budget`, the `pyrula_live_budget` fixture, and the summary of what each case
spent live (also from pytest-xdist workers), with the real OpenAI SDK against a stand-in."""

from __future__ import annotations

import pytest

import tests.fakes.provider  # noqa: F401  (in-process pytester runs reuse the SDK imports)

SUITE = """
import json
import pytest
from pyrula.errors import LiveBudgetExceeded
from pyrula.runtime import prices
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, json_reply

# $1000 a million output tokens: max_tokens=100 may cost $0.10; a reply (2 tokens) $0.002.
prices.add("suite-budget-model", input=0.0, output=1000.0)
SENT = []

def reply(request):
    SENT.append(json.loads(request.content)["messages"][-1]["content"])
    return json_reply(chat_completion("hi", model="suite-budget-model"))

def ask_model(question, max_tokens=100):
    client = openai_client(Upstream(OPENAI_LIB, reply))
    return client.chat.completions.create(
        model="suite-budget-model", messages=ask(question), max_tokens=max_tokens
    )

@pytest.mark.pyrula(live_budget_usd=0.15)
def test_within(pyrula_live_budget):
    ask_model("within")
    assert pyrula_live_budget.max_usd == 0.15
    assert pyrula_live_budget.spent.calls == (0 if SENT == [] else 1)

@pytest.mark.pyrula(live_budget_usd=0.05)
def test_over():
    with pytest.raises(LiveBudgetExceeded) as refused:
        ask_model("over")  # up to $0.10: past $0.05 when recorded, free when replayed
    assert "over" not in SENT
    raise refused.value

@pytest.mark.pyrula
def test_unbudgeted():
    ask_model("one")
    ask_model("two")

def test_no_model_calls():
    pass
"""


@pytest.fixture
def suite(sample_project):
    sample_project.makeini("[pytest]\npyrula_store = recordings\n")
    sample_project.makepyfile(test_suite=SUITE)
    return sample_project


def test_recording_past_a_case_s_budget_is_refused_and_each_case_s_spend_is_listed(suite):
    result = suite.runpytest("--pyrula-record-mode=once", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*LiveBudgetExceeded: test test_suite.py::test_over: its live budget of $0.0500 "
            "would be exceeded ($0.0000 spent live, up to $0.1000 more for this call)*",
            "*= pyrula live spend =*",
            "test_suite.py::test_within: $0.0020 in 1 live call (budget $0.1500)",
            "test_suite.py::test_unbudgeted: $0.0040 in 2 live calls",
            "total: $0.0060 in 3 live calls, 2 cases",
        ]
    )
    listed = result.stdout.str().split("pyrula live spend")[1].split("\ntotal: ")[0]
    assert "test_over:" not in listed
    assert "test_no_model_calls" not in result.stdout.str()


def test_a_replayed_run_spends_nothing_live_and_lists_nothing(suite):
    suite.runpytest("--pyrula-record-mode=once").assert_outcomes(passed=3, failed=1)
    # Replayed with every case's budget at $0: nothing goes out live, so nothing is refused.
    result = suite.runpytest("--pyrula-live-budget=0", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=1)  # test_over recorded nothing to replay
    result.stdout.fnmatch_lines(["*test_over*ReplayMiss*"])
    assert "pyrula live spend" not in result.stdout.str()


def test_the_run_s_budget_holds_each_case_without_one_of_its_own(suite):
    result = suite.runpytest(
        "--pyrula-record-mode=once", "--pyrula-live-budget=0.15", "-p", "no:randomly"
    )
    # test_unbudgeted's second call holds up to $0.10 beside its first call's $0.002: that fits
    # $0.15, not $0.10. test_within keeps its marker's $0.15.
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["test_suite.py::test_unbudgeted: $0.0040 in 2 live calls (budget $0.1500)"]
    )
    again = suite.runpytest("--pyrula-record-mode=all", "--pyrula-live-budget=0.10")
    again.assert_outcomes(passed=2, failed=2)
    again.stdout.fnmatch_lines(["FAILED *test_unbudgeted*LiveBudgetExceeded*"])


def test_xdist_workers_cases_are_listed_by_the_controller(suite):
    result = suite.runpytest_subprocess("-n", "2", "--pyrula-record-mode=once")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*= pyrula live spend =*", "total: $0.0060 in 3 live calls, 2 cases"]
    )


def test_a_budget_that_is_not_a_cost_fails_the_test_with_the_fix(sample_project):
    sample_project.makeini("[pytest]\npyrula_store = recordings\n")
    sample_project.makepyfile(
        test_bad="""
import pytest

@pytest.mark.pyrula(live_budget_usd="lots")
def test_bad():
    pass
"""
    )
    result = sample_project.runpytest("--pyrula-record-mode=once")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.pyrula(live_budget_usd=...) is a cost in USD, 0 or more*'lots'*"]
    )


UNPRICED = """
import pytest
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, json_reply

@pytest.mark.pyrula
def test_unpriced():
    client = openai_client(Upstream(OPENAI_LIB, lambda request: json_reply(chat_completion("hi"))))
    client.chat.completions.create(model="a-model-with-no-price", messages=ask("hi"))
"""


def test_live_calls_with_no_price_and_no_budget_are_listed_only_with_verbose(sample_project):
    sample_project.makeini("[pytest]\npyrula_store = recordings\n")
    sample_project.makepyfile(test_unpriced=UNPRICED)
    quiet = sample_project.runpytest("--pyrula-record-mode=all", "-p", "no:randomly")
    quiet.assert_outcomes(passed=1)
    assert "pyrula live spend" not in quiet.stdout.str()

    verbose = sample_project.runpytest("--pyrula-record-mode=all", "-p", "no:randomly", "-v")
    verbose.assert_outcomes(passed=1)
    verbose.stdout.fnmatch_lines(
        ["*= pyrula live spend =*", "*test_unpriced: $0.0000 in 1 live call (1 unpriced*"]
    )
