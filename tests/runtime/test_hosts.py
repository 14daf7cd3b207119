"""Workers on many hosts sharing one PostgreSQL store.

Each host is a network namespace whose workers reach the server over TCP, or, where namespaces
are unavailable, a process group (tests/fakes/hosts.py; the test ids say which ran). Hosts have
distinct host identities (`PYRULA_HOST_ID`): a worker may take a run whose holder's pid is dead
only on the holder's own host; across hosts it waits for the lease. Counts come from the
workflows' own side-effect logs and from the journal."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from tests.fakes.clock import wait_until
from tests.fakes.hosts import MODE, SERVER, Host, Network
from tests.fakes.postgres import fresh_url, restart

WORKER = ("-m", "pyrula.cli.app", "worker", "--import", "tests.runtime.worker_app", "--quiet")


@pytest.fixture(scope="module", params=[MODE.name])
def network() -> Iterator[Network]:
    """The hosts' network and server for this module (the test id names the mode)."""
    with Network(MODE) as made:
        yield made


@pytest.fixture
def hosts(network: Network) -> Iterator[Network]:
    if MODE.name != "netns":
        warnings.warn(str(MODE), stacklevel=1)  # shown in the run's summary: which mode ran
    yield network
    network.close_hosts()


def _workers(host: Host, url: str, *flags: str, count: int = 1) -> None:
    host.start(*WORKER, "--store", url, *flags, count=count)


def _gated(tmp_path: Path) -> tuple[Path, Path]:
    """The side-effect log and gate folder of a `gated` run, its step 0 open."""
    log, gates = tmp_path / "effects.log", tmp_path / "gates"
    log.touch()
    gates.mkdir()
    (gates / "0").touch()
    return log, gates


@pytest.mark.slow
def test_many_runs_on_several_workers_each_complete_exactly_once(hosts, tmp_path):
    url = fresh_url(hosts.url)
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

    host_a, host_b = hosts.host("host-a"), hosts.host("host-b")
    _workers(host_a, url, "--until-idle", count=2)
    _workers(host_b, url, "--until-idle", count=2)
    host_a.wait()
    host_b.wait()

    journal = RunStore(store)
    assert [h.id for h in again] == [handles[n].id for n in range(0, runs, 7)]
    assert [journal.get(h.id).status for h in handles] == ["completed"] * runs
    assert Counter(effects.read_text().split()) == Counter({str(n): 1 for n in range(runs)})
    store.close()


def _step_ends(journal: RunStore, run_id: str) -> list[tuple[str, int]]:
    """Each finished step of the run, with the attempt that journaled it."""
    attempt, ends = 0, []
    for event in journal.events(run_id):
        if event.type == "run:attempt":
            attempt = event.payload["attempt"]
        elif event.type == "step:done":
            ends.append((event.payload["name"], attempt))
    return ends


@pytest.mark.slow
def test_a_killed_hosts_run_is_resumed_by_another_host_after_its_lease(hosts, tmp_path):
    url = fresh_url(hosts.url)
    store = Store(url)
    log, gates = _gated(tmp_path)
    handle = submit("gated", str(log), str(gates), 3, store=store)
    host_a = hosts.host("host-a")
    _workers(host_a, url, "--lease-seconds", "2", count=2)
    wait_until(lambda: "start 1" in log.read_text(), "host A to start step 1")
    held = RunStore(store).get(handle.id).lease
    assert held is not None and held["host"] == "host-a"

    host_a.kill()  # the whole host goes
    (gates / "1").touch()
    (gates / "2").touch()
    host_b = hosts.host("host-b")
    _workers(host_b, url, "--lease-seconds", "2", "--until-idle")
    host_b.wait()

    journal = RunStore(store)
    assert journal.get(handle.id).status == "completed"
    assert journal.get(handle.id).result == 0 + 1 + 2
    lines = Counter(log.read_text().splitlines())
    # Step 0 finished on host A and was not run again; step 1 was cut short there and redone.
    assert lines == Counter(
        {"start 0": 1, "done 0": 1, "start 1": 2, "done 1": 1, "start 2": 1, "done 2": 1}
    )
    assert _step_ends(journal, handle.id) == [("s0", 1), ("s1", 2), ("s2", 2)]
    attempts = [e for e in journal.events(handle.id) if e.type == "run:attempt"]
    assert len(attempts) == 2
    # Host B is the same machine and host A's pids are dead, yet it waited for the lease.
    assert attempts[1].at >= held["expires"]
    store.close()


@pytest.mark.slow
def test_a_cut_off_hosts_run_is_taken_over_and_its_late_writes_are_fenced(hosts, tmp_path):
    url = fresh_url(hosts.url)
    store = Store(url)
    log, gates = _gated(tmp_path)
    handle = submit("gated", str(log), str(gates), 3, store=store)
    host_a, host_b = hosts.host("host-a"), hosts.host("host-b")
    _workers(host_a, url, "--lease-seconds", "2")
    wait_until(lambda: "start 1" in log.read_text(), "host A to start step 1")
    _workers(host_b, url, "--lease-seconds", "2", "--until-idle")
    held = RunStore(store).get(handle.id).lease
    assert held is not None and held["host"] == "host-a"

    # Host A is cut off, not killed: its processes live on (in a namespace whose link is down,
    # or frozen where hosts are process groups) and will finish step 1's work, but neither that
    # step nor a heartbeat reaches the server until the host is back.
    host_a.cut()
    (gates / "1").touch()
    wait_until(lambda: "start 2" in log.read_text(), "host B to take the run over")
    journal = _end_takeover(host_a, host_b, gates, store, handle.id)
    # Each step was journaled once: step 1 by host B, whatever host A finished meanwhile.
    assert _step_ends(journal, handle.id) == [("s0", 1), ("s1", 2), ("s2", 2)]
    attempts = [e for e in journal.events(handle.id) if e.type == "run:attempt"]
    assert len(attempts) == 2
    assert attempts[1].at >= held["expires"]
    lines = Counter(log.read_text().splitlines())
    assert (lines["start 1"], lines["done 2"]) == (2, 1)
    store.close()


def _end_takeover(host_a: Host, host_b: Host, gates: Path, store: Store, run_id: str) -> RunStore:
    """Host A back on the network after host B took its run over: A's late writes (the step it
    finished, or a heartbeat) are refused as the run is B's, A stops with every write it still
    had under way, B finishes the run (whose steps return 0, 1 and 2)."""
    host_a.restore()
    wait_until(lambda: "lost its lease" in host_a.stderr(), "host A to find its lease lost")
    host_a.stop()
    host_a.wait()
    (gates / "2").touch()
    host_b.wait()
    journal = RunStore(store)
    assert journal.get(run_id).status == "completed"
    assert journal.get(run_id).result == 0 + 1 + 2
    return journal


@pytest.mark.slow
def test_a_host_cut_off_inside_a_write_frees_its_locks_and_its_run_is_taken_over(hosts, tmp_path):
    # Host A is cut off while its step's body holds a write transaction open (the store's lock,
    # which every other writer needs, host B's claim included). The server keeps that session
    # until it notices it is dead (TCP keepalive: hours), but the store's sessions set
    # idle_in_transaction_session_timeout (5 s): the server then ends it and lets the lock go,
    # and host B takes the run over once A's lease has expired. (The hosts' server sets no such
    # timeout of its own: with PYRULA_PG_IDLE_IN_TRANSACTION_SECONDS=0 host B never gets in.)
    url = fresh_url(hosts.url)
    store = Store(url)
    log, gates = _gated(tmp_path)
    handle = submit("held_in_a_write", url, str(log), str(gates), store=store)
    host_a, host_b = hosts.host("host-a"), hosts.host("host-b")
    _workers(host_a, url, "--lease-seconds", "2")
    wait_until(lambda: "inside 1" in log.read_text(), "host A to hold a write open in step 1")

    host_a.cut()
    (gates / "1").touch()
    # B's lease outlasts the wait of its first write behind A's lock (up to the 5 s).
    _workers(host_b, url, "--lease-seconds", "10", "--until-idle")
    wait_until(lambda: "start 2" in log.read_text(), "host B to take the run over", timeout=120)
    journal = _end_takeover(host_a, host_b, gates, store, handle.id)
    # Step 1 is journaled once, by host B; what host A finished there was fenced off.
    assert _step_ends(journal, handle.id) == [("s0", 1), ("s1", 2), ("s2", 2)]
    assert [e.payload["attempt"] for e in journal.events(handle.id) if e.type == "run:attempt"] == [
        1,
        2,
    ]
    store.close()


@pytest.mark.slow
def test_workers_ride_out_a_server_restart_and_finish_every_run_once(hosts, tmp_path):
    url = fresh_url(hosts.url)
    store = Store(url)
    effects = tmp_path / "effects.log"
    effects.touch()
    runs = 60
    handles = [submit("exactly_once", str(effects), n, store=store) for n in range(runs)]
    store.close()
    host_a = hosts.host("host-a")
    _workers(host_a, url, "--until-idle", "--concurrency", "2", count=2)
    wait_until(lambda: len(effects.read_text().split()) >= 10, "some runs to finish")

    restart(SERVER)  # as a crash would: no shutdown, then up again

    host_a.wait()
    with Store(url) as reopened:
        journal = RunStore(reopened)
        assert [journal.get(h.id).status for h in handles] == ["completed"] * runs
    assert Counter(effects.read_text().split()) == Counter({str(n): 1 for n in range(runs)})
