"""Several worker processes on one store: each run executes to completion exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit

ROOT = Path(__file__).parents[2]
RUNS = 30
WORKERS = 3


@pytest.mark.slow
def test_runs_execute_exactly_once_across_worker_processes(tmp_path):
    store_path = tmp_path / "store"
    store = Store(store_path)
    effects = tmp_path / "effects.log"
    effects.touch()
    handles = [submit("exactly_once", str(effects), n, store=store) for n in range(RUNS)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pyrula.cli.app",
                "worker",
                "--import",
                "tests.runtime.worker_app",
                "--store",
                str(store_path),
                "--until-idle",
                "--lease-seconds",
                "5",
            ],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    journal = RunStore(store)
    assert [journal.get(h.id).status for h in handles] == ["completed"] * RUNS
    assert sorted(journal.get(h.id).result for h in handles) == [n * 10 for n in range(RUNS)]
    executions = Counter(effects.read_text().split())
    assert executions == Counter({str(n): 1 for n in range(RUNS)})
    by_worker = Counter(
        e.payload["worker"]
        for h in handles
        for e in journal.events(h.id)
        if e.type == "run:attempt"
    )
    assert sum(by_worker.values()) == RUNS
