"""Workers on many hosts sharing one PostgreSQL store.

Hosts are process groups with distinct host identities (`PYRULA_HOST_ID`): a worker may take a
run whose holder's pid is dead only on the holder's own host; across hosts it waits for the
lease. Counts come from the workflows' own side-effect logs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from tests.fakes.clock import wait_until
from tests.fakes.postgres import fresh_url, restart, server

ROOT = Path(__file__).parents[2]


def _host(url: str, host: str, *flags: str, count: int = 1) -> subprocess.Popen[str]:
    """`count` worker processes in one new process group: one "host" named `host`. The group's
    leader starts them and exits with the worst of their exit codes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYRULA_HOST_ID": host}
    command = [sys.executable, "-m", "pyrula.cli.app", "worker", "--import"]
    command += ["tests.runtime.worker_app", "--store", url, "--quiet", *flags]
    return subprocess.Popen(
        [sys.executable, "-c", _LEADER, str(count), *command],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


_LEADER = (
    "import subprocess, sys\n"
    "workers = [subprocess.Popen(sys.argv[2:]) for _ in range(int(sys.argv[1]))]\n"
    "sys.exit(max(worker.wait() for worker in workers))\n"
)


def _finish(*hosts: subprocess.Popen[str]) -> None:
    for host in hosts:
        _, err = host.communicate(timeout=180)
        assert host.returncode == 0, err


@pytest.mark.slow
def test_many_runs_on_several_workers_each_complete_exactly_once(tmp_path):
    url = fresh_url()
    store = Store(url)
    effects = tmp_path / "effects.log"
    effects.touch()
    runs = 120
    handles = [
        submit("exactly_once", str(effects), n, store=store, idempotency_key=f"k{n}")
        for n in range(runs)
    ]
    # The same submissions again attach to the runs already made.
    again = [
        submit("exactly_once", str(effects), n, store=store, idempotency_key=f"k{n}")
        for n in range(0, runs, 7)
    ]

    _finish(
        _host(url, "host-a", "--until-idle", count=2), _host(url, "host-b", "--until-idle", count=2)
    )

    journal = RunStore(store)
    assert [h.id for h in again] == [handles[n].id for n in range(0, runs, 7)]
    assert [journal.get(h.id).status for h in handles] == ["completed"] * runs
    assert Counter(effects.read_text().split()) == Counter({str(n): 1 for n in range(runs)})
    store.close()


@pytest.mark.slow
def test_a_killed_hosts_run_is_resumed_by_another_host_after_its_lease(tmp_path):
    url = fresh_url()
    store = Store(url)
    log, gates = tmp_path / "effects.log", tmp_path / "gates"
    log.touch()
    gates.mkdir()
    (gates / "0").touch()
    handle = submit("gated", str(log), str(gates), 3, store=store)
    host_a = _host(url, "host-a", "--lease-seconds", "2", count=2)
    wait_until(lambda: "start 1" in log.read_text(), "host A to start step 1")
    held = RunStore(store).get(handle.id).lease
    assert held is not None and held["host"] == "host-a"

    os.killpg(host_a.pid, signal.SIGKILL)  # the whole host goes
    host_a.wait(30)
    (gates / "1").touch()
    (gates / "2").touch()
    host_b = _host(url, "host-b", "--lease-seconds", "2", "--until-idle")
    _finish(host_b)

    journal = RunStore(store)
    assert journal.get(handle.id).status == "completed"
    assert journal.get(handle.id).result == 0 + 1 + 2
    lines = Counter(log.read_text().splitlines())
    # Step 0 finished on host A and was not run again; step 1 was cut short there and redone.
    assert lines == Counter(
        {"start 0": 1, "done 0": 1, "start 1": 2, "done 1": 1, "start 2": 1, "done 2": 1}
    )
    attempts = [e for e in journal.events(handle.id) if e.type == "run:attempt"]
    assert len(attempts) == 2
    # Host B is the same machine and host A's pids are dead, yet it waited for the lease.
    assert attempts[1].at >= held["expires"]
    store.close()


@pytest.mark.slow
def test_workers_ride_out_a_server_restart_and_finish_every_run_once(tmp_path):
    url = fresh_url(str(server("workers-restart").get_uri()))
    store = Store(url)
    effects = tmp_path / "effects.log"
    effects.touch()
    runs = 60
    handles = [submit("exactly_once", str(effects), n, store=store) for n in range(runs)]
    store.close()
    workers = _host(url, "host-a", "--until-idle", "--concurrency", "2", count=2)
    wait_until(lambda: len(effects.read_text().split()) >= 10, "some runs to finish")

    restart("workers-restart")

    _finish(workers)
    with Store(url) as reopened:
        journal = RunStore(reopened)
        assert [journal.get(h.id).status for h in handles] == ["completed"] * runs
    assert Counter(effects.read_text().split()) == Counter({str(n): 1 for n in range(runs)})
