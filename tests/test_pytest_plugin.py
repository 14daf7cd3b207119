"""The pytest plugin: marker and fixture, record modes, unused and old recordings, xdist."""

from __future__ import annotations

import pathlib

import pytest

# Imported here so in-process pytester runs reuse them instead of importing the SDKs each time.
import tests.fakes.provider  # noqa: F401
from tests.fakes.postgres import fresh_url

ROOT = pathlib.Path(__file__).parents[1]

SUITE = """
import json
import pytest
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, json_reply

CALLS = []

def reply(request):
    CALLS.append(1)
    question = json.loads(request.content)["messages"][-1]["content"]
    return json_reply(chat_completion("answer to " + question))

@pytest.mark.pyrula
def test_marked():
    client = openai_client(Upstream(OPENAI_LIB, reply))
    out = client.chat.completions.create(model="m", messages=ask("{question}"))
    assert out.choices[0].message.content == "answer to {question}"

def test_fixture(pyrula_cassette):
    client = openai_client(Upstream(OPENAI_LIB, reply))
    client.chat.completions.create(model="m", messages=ask("fixture"))
    assert pyrula_cassette.name.endswith("test_fixture")

def test_no_live_calls_when_replaying(request):
    if request.config.getoption("pyrula_record_mode") == "none":
        assert CALLS == []
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\npyrula_store = recordings\n")

    def write(question: str = "q1") -> None:
        pytester.makepyfile(test_suite=SUITE.replace("{question}", question))

    return write


def test_record_then_replay_offline(pytester, suite):
    suite()
    pytester.runpytest("--pyrula-record-mode=once").assert_outcomes(passed=3)
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=3)


def test_a_changed_request_fails_the_test_with_the_difference(pytester, suite):
    suite("q1")
    pytester.runpytest("--pyrula-record-mode=once").assert_outcomes(passed=3)
    suite("q2")
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*messages[[]0[]].content changed*"])


def test_unused_recordings_are_reported_and_pruned(pytester, suite):
    suite()
    pytester.runpytest("--pyrula-record-mode=once").assert_outcomes(passed=3)
    pytester.makepyfile(
        test_suite=SUITE.replace("{question}", "q1").replace(
            '    client.chat.completions.create(model="m", messages=ask("fixture"))\n', ""
        )
    )
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*1 recording(s) unused*", "*--pyrula-prune-unused*"])
    pytester.runpytest("--pyrula-prune-unused").stdout.fnmatch_lines(["*1 recording(s) pruned*"])
    assert "recording(s) unused" not in pytester.runpytest().stdout.str()


def test_old_recordings_are_flagged(pytester, suite):
    suite()
    pytester.runpytest("--pyrula-record-mode=once").assert_outcomes(passed=3)
    result = pytester.runpytest("--pyrula-max-age=-1")
    result.stdout.fnmatch_lines(["*recording(s) older than -1 days*"])


@pytest.mark.slow
def test_xdist_workers_share_one_store(pytester, suite):
    suite()
    pytester.runpytest_subprocess("-n", "2", "--pyrula-record-mode=once").assert_outcomes(passed=3)
    pytester.runpytest_subprocess("-n", "2").assert_outcomes(passed=3)


def test_a_replay_only_run_with_a_mistyped_store_names_the_path(pytester, suite):
    suite()
    result = pytester.runpytest("--pyrula-store=no-such-store")
    result.assert_outcomes(passed=1, errors=1, failed=1)
    result.stdout.fnmatch_lines(["*no Pyrula store at *no-such-store*--pyrula-record-mode=once*"])
    assert not (pytester.path / "no-such-store").exists()


def test_record_then_replay_offline_on_a_postgresql_store(pytester, suite):
    suite()
    url = fresh_url()
    pytester.runpytest("--pyrula-record-mode=once", "--pyrula-store", url).assert_outcomes(passed=3)
    pytester.runpytest("--pyrula-store", url).assert_outcomes(passed=3)
