"""A replay refusal in a test is reported in a few lines, with a fix that depends on the case:
never recorded (the record-mode flag) or recorded but changed (re-record this test, `-k`)."""

from __future__ import annotations

import pytest

import tests.fakes.provider  # noqa: F401  (in-process pytester runs reuse the SDK imports)

SUITE = """
import pytest
from tests.fakes.openai_api import openai_client, upstream
from tests.fakes.provider import ask

@pytest.mark.pyrula
def test_recorded():
    client = openai_client(upstream())
    client.chat.completions.create(model="m", messages=ask("{question}"))
{extra}
"""

NEW_TEST = """
@pytest.mark.pyrula
def test_added_later():
    client = openai_client(upstream())
    client.chat.completions.create(model="m", messages=ask("new"))
"""


@pytest.fixture
def suite(sample_project):
    pytester = sample_project
    pytester.makeini("[pytest]\npyrula_store = recordings\n")

    def write(question: str = "q1", extra: str = "") -> None:
        pytester.makepyfile(
            test_suite=SUITE.replace("{question}", question).replace("{extra}", extra)
        )

    write()
    pytester.runpytest("--pyrula-record-mode=once").assert_outcomes(passed=1)
    return write


def _failure_section(result: pytest.RunResult) -> list[str]:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "= FAILURES =" in line)
    end = next(
        i for i, line in enumerate(lines) if i > start and line.startswith("=") and " " in line
    )
    return lines[start + 2 : end]


def test_a_test_never_recorded_fails_in_a_few_lines_naming_the_record_flag(pytester, suite):
    suite(extra=NEW_TEST)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    section = _failure_section(result)
    assert len(section) <= 4, "\n".join(section)
    text = "\n".join(section)
    assert "test_suite.py:" in text and 'ask("new")' in text
    assert "was never recorded" in text
    assert "Record this test with `pytest test_suite.py -k test_added_later" in text
    assert "--pyrula-record-mode=once`" in text
    assert "new_episodes" not in text


def test_a_changed_request_fails_in_a_few_lines_with_the_difference_and_re_record_advice(
    pytester, suite
):
    suite("q2")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    section = _failure_section(result)
    assert len(section) <= 8, "\n".join(section)
    text = "\n".join(section)
    assert 'messages[0].content changed ("q1" -> "q2")' in text
    assert "re-record this test: `pytest test_suite.py -k test_recorded" in text
    assert "--pyrula-record-mode=all`" in text


def test_tb_long_keeps_pytests_own_report(pytester, suite):
    suite("q2")
    result = pytester.runpytest("--tb=long")
    result.assert_outcomes(failed=1)
    assert len(_failure_section(result)) > 20
