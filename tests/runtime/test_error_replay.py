"""Restart does not change the path a body takes: journaled errors replay as themselves,
through a SIGKILLed worker process, a child run and `RunHandle.result()`."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from tests.runtime.error_app import declines, parent_of_declines
from tests.runtime.error_cases import CASES, Declined
from tests.runtime.support import drive, new_store, run_to_rest

ROOT = Path(__file__).parents[2]


def _worker(store: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pyrula.cli.app",
            "worker",
            "--import",
            "tests.runtime.error_app",
            "--store",
            str(store),
            *extra,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, deadline: float = 60.0) -> None:
    give_up = time.monotonic() + deadline
    while not path.exists():
        assert time.monotonic() < give_up, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [7, 11])
def test_each_error_is_caught_by_the_same_clause_after_sigkill_and_resume(tmp_path, seed):
    order = random.Random(seed).sample(sorted(CASES), k=len(CASES))
    store_path, log, gate = tmp_path / "store", tmp_path / "branches.log", tmp_path / "gate"
    handle = submit("error_paths", order, str(log), str(gate), store=Store(store_path))

    first = _worker(store_path)
    _wait_for(Path(f"{log}.marker"))  # every error was raised, caught and journaled
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)  # waits, and closes its stderr pipe
    live = log.read_text().splitlines()

    gate.touch()
    second = _worker(store_path, "--until-idle")
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err

    record = RunStore(Store(store_path)).get(handle.id)
    assert record.status == "completed", record.error
    assert record.result == live  # the same branches, replayed
    assert log.read_text().splitlines() == live  # and no branch step ran twice
    assert len(live) == len(CASES)


def test_a_failed_child_is_seen_by_its_parent_as_its_own_class():
    handle = run_to_rest(parent_of_declines)
    assert asyncio.run(handle.result()) == "child declined with code 402"


def test_run_handle_result_raises_the_bodys_own_error():
    store = new_store()
    handle = submit(declines, store=store)
    drive(store)
    with pytest.raises(Declined) as caught:
        asyncio.run(handle.result())
    assert caught.value.code == 402
    assert any(handle.id in note for note in caught.value.__notes__)
