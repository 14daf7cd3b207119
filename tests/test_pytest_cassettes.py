"""A sample project's life with text cassettes, under real git: each test records its own file
beside the tests, two branches recording different tests merge cleanly, and a fresh clone — the
cassette files only, no cache — replays offline with the network blocked."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess

import pytest

import tests.fakes.provider  # noqa: F401  (in-process pytester runs reuse the SDK imports)

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

def ask_once(question):
    client = openai_client(Upstream(OPENAI_LIB, reply))
    return client.chat.completions.create(model="m", messages=ask(question))

@pytest.mark.pyrula
def test_alpha():
    assert ask_once("alpha").choices[0].message.content == "answer to alpha"

@pytest.mark.pyrula
def test_beta():
    assert ask_once("beta").choices[0].message.content == "answer to beta"

@pytest.mark.parametrize("n", [1, 2])
def test_fixture(pyrula_cassette, n):
    assert ask_once(f"gamma {n}").choices[0].message.content == f"answer to gamma {n}"

def test_no_live_call_when_replaying(request):
    if request.config.getoption("pyrula_record_mode") == "none":
        assert CALLS == []
"""


def _git(cwd: pathlib.Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _tests(pytester: pytest.Pytester, module: str, source: str) -> None:
    """A sample project of one test module, `tests/<module>.py`, recording text cassettes."""
    pytester.makeini("[pytest]\n")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / f"{module}.py").write_text(source)


@pytest.fixture
def project(sample_project):
    pytester = sample_project
    _tests(pytester, "test_chat", SUITE)
    _git(pytester.path, "init", "-q", "-b", "main")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-q", "-m", "tests, not recorded yet")
    return pytester.path


def test_each_test_records_its_own_readable_file_beside_the_tests(pytester, project):
    pytester.runpytest("--pyrula-record-mode=once").assert_outcomes(passed=5)
    folder = project / "tests" / "cassettes" / "test_chat"
    assert sorted(p.name for p in folder.iterdir()) == [
        "test_alpha.json",
        "test_beta.json",
        "test_fixture[1].json",
        "test_fixture[2].json",
    ]
    entry = json.loads((folder / "test_alpha.json").read_text())["exchanges"][0]
    assert entry["request"]["compared"]["messages"] == [{"content": "alpha", "role": "user"}]
    # What git sees: the cassette files, never the cache.
    status = _git(project, "status", "--porcelain", "--untracked-files=all")
    assert sorted(line[3:] for line in status.splitlines()) == [
        f"tests/cassettes/test_chat/{name}" for name in sorted(p.name for p in folder.iterdir())
    ]


def test_two_branches_merge_cleanly_and_a_fresh_clone_replays_offline(pytester, project):
    _git(project, "checkout", "-q", "-b", "alpha")
    pytester.runpytest("-k", "alpha", "--pyrula-record-mode=once").assert_outcomes(passed=1)
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "record alpha")
    _git(project, "checkout", "-q", "main")
    _git(project, "checkout", "-q", "-b", "others")
    result = pytester.runpytest("-k", "not alpha", "--pyrula-record-mode=once")
    result.assert_outcomes(passed=4, deselected=1)
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "record beta and gamma")
    _git(project, "checkout", "-q", "alpha")
    _git(project, "merge", "-q", "--no-edit", "others")  # check=True: a conflict fails here
    assert _git(project, "status", "--porcelain") == ""

    clone = project.parent / "fresh-checkout"
    _git(project.parent, "clone", "-q", str(project), str(clone))
    assert not (clone / ".pyrula").exists()
    # Replay-only by default: every request is answered from the files, none leaves.
    result = pytester.runpytest(str(clone), "--rootdir", str(clone), "-p", "no:randomly")
    result.assert_outcomes(passed=5)
    assert (clone / ".pyrula" / "data.mdb").exists()  # the cache, built on first use
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == ""


def test_pruning_unused_recordings_rewrites_the_tests_file(pytester, project):
    pytester.runpytest("-k", "alpha", "--pyrula-record-mode=once").assert_outcomes(passed=1)
    path = project / "tests" / "cassettes" / "test_chat" / "test_alpha.json"
    suite = (project / "tests" / "test_chat.py").read_text()
    twice = suite.replace(
        '    assert ask_once("alpha")', '    ask_once("alpha, twice")\n    assert ask_once("alpha")'
    )
    (project / "tests" / "test_chat.py").write_text(twice)
    pytester.runpytest("-k", "alpha", "--pyrula-record-mode=new_episodes").assert_outcomes(passed=1)
    assert len(json.loads(path.read_text())["exchanges"]) == 2
    (project / "tests" / "test_chat.py").write_text(suite)
    result = pytester.runpytest("-k", "alpha", "--pyrula-prune-unused")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 recording(s) pruned*"])
    (entry,) = json.loads(path.read_text())["exchanges"]
    assert entry["request"]["compared"]["messages"][0]["content"] == "alpha"
    pytester.runpytest("-k", "alpha").assert_outcomes(passed=1)


def test_a_miss_names_what_grep_finds_in_the_file_and_that_run_never_prunes(pytester, project):
    pytester.runpytest("-k", "alpha", "--pyrula-record-mode=once").assert_outcomes(passed=1)
    folder = project / "tests" / "cassettes"
    recorded = (folder / "test_chat" / "test_alpha.json").read_bytes()
    suite = (project / "tests" / "test_chat.py").read_text()
    (project / "tests" / "test_chat.py").write_text(suite.replace('"alpha"', '"alpha, reworded"'))
    result = pytester.runpytest("-k", "alpha")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    # Once in the failure, and again in the short summary where it is not cut (CI=true).
    (named,) = set(re.findall(r"The nearest recorded one \(fingerprint ([0-9a-f]{12}),", output))
    found = subprocess.run(["grep", "-rl", named, str(folder)], capture_output=True, text=True)
    assert found.stdout.splitlines() == [str(folder / "test_chat" / "test_alpha.json")]
    # The unused recording is the one the miss compares with: no advice to delete it...
    result.stdout.fnmatch_lines(["*1 recording(s) unused*", "*kept: some tests failed*"])
    assert "delete them with" not in output
    # ...and asked to, a run with a miss deletes nothing.
    result = pytester.runpytest("-k", "alpha", "--pyrula-prune-unused")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not pruned: some tests failed*"])
    assert (folder / "test_chat" / "test_alpha.json").read_bytes() == recorded


# A stand-in whose replies carry the headers a real provider's change on every call: `date`
# and `server` come from the environment, so each run can answer with other values.
STAMPED = """
import json, os
import pytest
from tests.fakes.openai_api import chat_completion, chat_sse, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, json_reply, sse_reply

def reply(request):
    body = json.loads(request.content)
    answer = os.environ.get("ANSWER", "answer to ") + body["messages"][-1]["content"]
    if body.get("stream"):
        status, headers, frames = sse_reply(chat_sse(answer))
    else:
        status, headers, frames = json_reply(chat_completion(answer))
    stamp = {"date": os.environ["STAND_IN_DATE"], "server": os.environ["STAND_IN_SERVER"]}
    return status, {**headers, **stamp}, frames

def client():
    return openai_client(Upstream(OPENAI_LIB, reply))

@pytest.mark.pyrula
def test_plain():
    raw = client().chat.completions.with_raw_response.create(model="m", messages=ask("a"))
    assert raw.headers["date"] == os.environ["STAND_IN_DATE"]
    assert raw.headers["server"] == os.environ["STAND_IN_SERVER"]

@pytest.mark.pyrula
def test_stream():
    with client().chat.completions.with_streaming_response.create(
        model="m", messages=ask("s"), stream=True
    ) as raw:
        assert raw.headers["date"] == os.environ["STAND_IN_DATE"]
        assert list(raw.parse())
"""


def _stamp(monkeypatch, date: str, server: str) -> None:
    monkeypatch.setenv("STAND_IN_DATE", date)
    monkeypatch.setenv("STAND_IN_SERVER", server)


def test_re_recording_an_unchanged_test_leaves_its_cassette_file_byte_for_byte(
    pytester, sample_project, monkeypatch
):
    _tests(pytester, "test_chat", STAMPED)
    _git(pytester.path, "init", "-q", "-b", "main")
    first = "Mon, 01 Dec 2025 09:00:00 GMT"
    _stamp(monkeypatch, first, "stand-in/1")
    pytester.runpytest("--pyrula-record-mode=once", "-p", "no:randomly").assert_outcomes(passed=2)
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-q", "-m", "recorded")
    folder = pytester.path / "tests" / "cassettes"
    assert first in (folder / "test_chat" / "test_plain.json").read_text()

    # The same replies a year later, from another server: re-recorded, not one byte changes.
    _stamp(monkeypatch, "Tue, 01 Dec 2026 10:00:00 GMT", "stand-in/2")
    result = pytester.runpytest("--pyrula-record-mode=all", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    _git(pytester.path, "diff", "--exit-code", "--", str(folder))  # check=True: a diff fails
    assert _git(pytester.path, "status", "--porcelain", "--untracked-files=all") == ""

    # Replayed, the SDK gets the headers the file keeps: those of the first recording, from
    # the cache and from a fresh clone's files alike.
    _stamp(monkeypatch, first, "stand-in/1")
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
    clone = pytester.path.parent / "fresh-clone"
    _git(pytester.path.parent, "clone", "-q", str(pytester.path), str(clone))
    pytester.runpytest(str(clone), "--rootdir", str(clone), "-p", "no:randomly").assert_outcomes(
        passed=2
    )

    # A reply that did change is re-recorded: its entry, stamps and all, and only that.
    monkeypatch.setenv("ANSWER", "a new answer to ")
    _stamp(monkeypatch, "Wed, 02 Dec 2026 10:00:00 GMT", "stand-in/2")
    pytester.runpytest("--pyrula-record-mode=all", "-p", "no:randomly").assert_outcomes(passed=2)
    diff = _git(pytester.path, "diff", "--", str(folder))
    assert '+        ["date", "Wed, 02 Dec 2026 10:00:00 GMT"],' in diff
    assert "a new answer to a" in diff and "a new answer to " in diff


# Tests that share one named cassette, and so one file: under pytest-xdist, several workers
# record into it at once.
SHARED = """
import json, os
import pytest
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream, ask, json_reply

def reply(request):
    question = json.loads(request.content)["messages"][-1]["content"]
    return json_reply(chat_completion("answer to " + question))

@pytest.mark.parametrize("n", range(int(os.environ.get("SHARED_COUNT", "40"))))
@pytest.mark.pyrula(name="shared", mode=os.environ.get("SHARED_MODE", "new_episodes"))
def test_shared(n):
    client = openai_client(Upstream(OPENAI_LIB, reply))
    out = client.chat.completions.create(model="m", messages=ask(f"q{n}"))
    assert out.choices[0].message.content == f"answer to q{n}"
"""


@pytest.fixture
def shared(sample_project):
    _tests(sample_project, "test_shared", SHARED)
    return sample_project.path / "tests" / "cassettes" / "test_shared" / "shared.json"


def _asked(path: pathlib.Path) -> list[str]:
    entries = json.loads(path.read_text())["exchanges"]
    return sorted(e["request"]["compared"]["messages"][0]["content"] for e in entries)


@pytest.mark.slow
def test_four_xdist_workers_recording_into_one_file_lose_no_recording(
    pytester, shared, monkeypatch
):
    pytester.runpytest_subprocess("-n", "4", "-p", "no:randomly").assert_outcomes(passed=40)
    assert _asked(shared) == sorted(f"q{n}" for n in range(40))
    # The file alone replays every test, offline, on four workers again.
    (pytester.path / ".pyrula").rename(pytester.path / "old-cache")
    monkeypatch.setenv("SHARED_MODE", "none")
    pytester.runpytest_subprocess("-n", "4", "-p", "no:randomly").assert_outcomes(passed=40)
    # One test fewer: what the four workers used adds up to all but its recording.
    monkeypatch.setenv("SHARED_COUNT", "39")
    result = pytester.runpytest_subprocess("-n", "4", "-p", "no:randomly", "--pyrula-prune-unused")
    result.assert_outcomes(passed=39)
    result.stdout.fnmatch_lines(["*1 recording(s) pruned:*", "*test_shared/shared.json: 1"])
    assert _asked(shared) == sorted(f"q{n}" for n in range(39))


def test_a_shared_cassette_keeps_what_tests_not_run_recorded(pytester, shared, monkeypatch):
    monkeypatch.setenv("SHARED_COUNT", "3")
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=3)
    # Each test re-records its own call; none drops the others'.
    monkeypatch.setenv("SHARED_MODE", "all")
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=3)
    assert _asked(shared) == ["q0", "q1", "q2"]
    # With test 2 gone and test 0 deselected, nothing is known unused, so nothing is pruned.
    monkeypatch.setenv("SHARED_MODE", "none")
    monkeypatch.setenv("SHARED_COUNT", "2")
    result = pytester.runpytest(
        "-p",
        "no:randomly",
        "--deselect",
        "tests/test_shared.py::test_shared[0]",
        "--pyrula-prune-unused",
    )
    result.assert_outcomes(passed=1, deselected=1)
    assert "recording(s)" not in result.stdout.str()
    assert _asked(shared) == ["q0", "q1", "q2"]
    # Every test of it run and passed: its one unused recording goes.
    result = pytester.runpytest("-p", "no:randomly", "--pyrula-prune-unused")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*1 recording(s) pruned:*"])
    assert _asked(shared) == ["q0", "q1"]
