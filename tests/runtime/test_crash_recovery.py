"""SIGKILL real worker processes at random points; the run must finish as if nothing happened."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from pyrula.runtime.fact_log import read_logged
from tests.fakes.clock import wait_until
from tests.fakes.server import Script, Seen, Server
from tests.runtime.crash_app import STEPS
from tests.runtime.support import WorkerProcess

ROOT = Path(__file__).parents[2]
KILLS_PER_RUN = 10
RUNS = 5  # 50 kills in all


@pytest.fixture
def provider():
    log: list[str] = []

    def reply(seen: Seen) -> Script:
        question = seen.json()["messages"][-1]["content"]
        log.append(question)
        return Script(
            frames=[json.dumps({"choices": [{"message": {"content": f"re {question}"}}]}).encode()]
        )

    with Server(reply) as server:
        yield server.url, log


class Zygote:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.runtime.crash_app"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    def _ask(self, line: str) -> int:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def fork(self, store: Path) -> int:
        return self._ask(f"fork {store}")

    def reap(self, pid: int) -> int:
        return self._ask(f"reap {pid}")

    def close(self) -> None:
        self.process.kill()
        with self.process:  # closes its stdin and stdout pipes, then waits
            pass


def _done_steps(journal: RunStore, run_id: str, store_path: Path) -> set[str]:
    """The steps whose facts are durable: in the store, or in a killed worker's fact log (which
    the next worker puts in the store before it resumes the run)."""
    logged = [fact.event for fact in read_logged(store_path) if fact.run_id == run_id]
    events = [*journal.events(run_id), *logged]
    return {e.payload["name"] for e in events if e.type == "step:done"}


def _ran_steps(log_path: Path) -> int:
    return len({line for line in log_path.read_text().splitlines()})


def _journaled_calls(journal: RunStore, run_id: str) -> int:
    return sum(1 for e in journal.events(run_id) if e.type == "llm:done")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(RUNS))
def test_sigkill_at_random_points_repeats_no_finished_work(tmp_path, provider, seed):
    url, provider_log = provider
    rng = random.Random(seed)
    store_path = tmp_path / "store"
    log_path = tmp_path / "effects.log"
    log_path.touch()
    store = Store(store_path)
    journal = RunStore(store)
    handle = submit("crashy", str(log_path), url, store=store)
    zygote = Zygote()
    try:
        kills = 0
        while kills < KILLS_PER_RUN and journal.get(handle.id).status != "completed":
            # Killed after 1 to 6 more steps have run (their facts committed, logged, or not yet).
            target = min(STEPS, _ran_steps(log_path) + rng.randint(1, 6))
            pid = zygote.fork(store_path)
            deadline = time.monotonic() + 30
            while _ran_steps(log_path) < target and time.monotonic() < deadline:
                if journal.get(handle.id).status == "completed":
                    break
                time.sleep(0.0005 * rng.randint(0, 4))
            os.kill(pid, signal.SIGKILL)
            assert zygote.reap(pid) != 0 or journal.get(handle.id).status == "completed"
            kills += 1
            # Everything journaled before the kill must never be done again.
            finished = _done_steps(journal, handle.id, store_path)
            effects = log_path.read_text().splitlines()
            journaled_calls = _journaled_calls(journal, handle.id)
            calls_sent = len(provider_log)
            checkpoints = (finished, len(effects), journaled_calls, calls_sent)
            _CHECKPOINTS.setdefault(seed, []).append(checkpoints)
        pid = zygote.fork(store_path)
        assert zygote.reap(pid) == 0
    finally:
        zygote.close()

    record = journal.get(handle.id)
    assert record.status == "completed", record.error
    expected = sum(i * i for i in range(STEPS)) + sum(
        len(f"re call {i}") for i in range(STEPS) if i % 5 == 4
    )
    assert record.result == expected
    effects = log_path.read_text().splitlines()
    for finished, effects_then, _, _ in _CHECKPOINTS[seed]:
        again = {line.split()[1] for line in effects[effects_then:]}
        assert not again & {name[1:] for name in finished}, "a finished step ran again"
    # A step ran more than once only if a kill landed inside it: never more than the kills.
    assert max(Counter(effects).values()) <= KILLS_PER_RUN + 1
    # A model call journaled before a kill is never sent to the provider again after it.
    calls = [f"call {i}" for i in range(STEPS) if i % 5 == 4]
    for _, _, journaled, sent_then in _CHECKPOINTS[seed]:
        assert not set(calls[:journaled]) & set(provider_log[sent_then:]), "a call was re-sent"
    assert set(provider_log) == set(calls)
    # The kills landed while the run was still going, not after it had finished.
    assert sum(1 for _, _, _, sent_then in _CHECKPOINTS[seed] if sent_then < len(calls)) >= 3
    journaled_questions = _journaled_calls(journal, handle.id)
    assert journaled_questions == STEPS // 5
    store.close()
    Store(store_path).close()  # the store opens cleanly afterwards


_CHECKPOINTS: dict[int, list[tuple[set[str], int, int, int]]] = {}


@pytest.mark.slow
def test_a_lone_run_killed_mid_step_resumes_without_repeating_its_journaled_steps(tmp_path):
    """A worker executing one run journals its facts on its own loop thread (no committer
    thread), after the first in its fact log. SIGKILLed inside step 2, with steps 0 and 1
    journaled: a second worker finishes the run, steps 0 and 1 never run again, step 2 runs
    again whole."""
    store_path, effects, gates = tmp_path / "store", tmp_path / "effects.log", tmp_path / "gates"
    effects.touch()
    gates.mkdir()
    for i in (0, 1):
        (gates / str(i)).touch()
    store = Store(store_path)
    journal = RunStore(store)
    handle = submit("gated", str(effects), str(gates), 3, store=store)
    first = WorkerProcess(store_path)
    try:
        wait_until(lambda: "start 2" in effects.read_text().splitlines(), "step 2 to start")
        assert _done_steps(journal, handle.id, store_path) == {"s0", "s1"}  # s1 in its fact log
        first.send(signal.SIGKILL)
        assert first.exit_code() == -signal.SIGKILL
    finally:
        first.kill()
    (gates / "2").touch()
    second = WorkerProcess(store_path, "--until-idle")
    try:
        assert second.exit_code() == 0, second.stderr
    finally:
        second.kill()
    record = journal.get(handle.id)
    assert (record.status, record.result, record.attempt) == ("completed", 0 + 1 + 2, 2)
    lines = Counter(effects.read_text().splitlines())
    assert lines["start 0"] == lines["done 0"] == lines["start 1"] == lines["done 1"] == 1
    assert lines["start 2"] == 2 and lines["done 2"] == 1
    store.close()
