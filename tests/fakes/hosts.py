"""Hosts for the several-hosts tests: worker groups in their own network namespaces, or
process groups where namespaces are unavailable.

`MODE` says which this machine gets, once per test process: `netns` where this process can make
a namespace, a veth pair and a bridge (root with CAP_NET_ADMIN and CAP_SYS_ADMIN), else
`process-groups`, with the reason. `PYRULA_TEST_HOSTS=netns|process-groups` forces one (forcing
`netns` where it cannot work fails the tests rather than falling back).

In `netns` mode a `Network` is a bridge on a free private /24 in this namespace, holding the
address of a throwaway PostgreSQL that listens on TCP there (and trusts that subnet), and each
`Host` is a network namespace joined to the bridge by a veth pair: its workers reach the store
over TCP, `cut()` takes its link down (a partition: packets vanish, nothing is closed) and
`restore()` brings it back. In `process-groups` mode the server is on a unix socket and `cut()`
freezes the host's processes (SIGSTOP) until `restore()`: the server hears nothing from them
either way. In both, a host's workers run in one process group with their own
`PYRULA_HOST_ID`, so `kill()` takes the whole host at once.

Names carry this process's pid, so parallel test processes never clash, and what a killed test
process left behind is deleted by the next `Network`. Everything is torn down on `close()`.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.fakes.postgres import restart, server

ROOT = Path(__file__).parents[2]
ENV = "PYRULA_TEST_HOSTS"
SERVER = "hosts"  # the pgserver server the host tests share (and may restart)
PORT = 5432


@dataclass(frozen=True)
class Mode:
    """How hosts are made on this machine, and why not namespaces when they are not."""

    name: str  # "netns" or "process-groups"
    reason: str = ""

    def __str__(self) -> str:
        if self.name == "netns":
            return "hosts are network namespaces on a bridge; the server is reached over TCP"
        return f"hosts are process groups with distinct host ids ({self.reason})"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def detect() -> Mode:
    """`netns` if this process may make network namespaces, else `process-groups` and why."""
    forced = os.environ.get(ENV, "")
    if forced == "netns":
        return Mode("netns")
    if forced == "process-groups":
        return Mode("process-groups", f"{ENV}=process-groups")
    if forced:
        raise ValueError(f"{ENV}={forced!r}: use netns or process-groups")
    try:
        failed = _probe()
    except (OSError, subprocess.SubprocessError) as exc:
        return Mode("process-groups", f"no usable `ip` command: {exc}")
    return Mode("process-groups", failed) if failed else Mode("netns")


def _probe() -> str:
    """Make (and delete) what a `Network` makes: a namespace a process can run in, a veth pair
    into it and a bridge. What failed, or "" if everything worked."""
    tag = f"{os.getpid():x}"
    namespace, link, bridge = f"pyrula-probe-{tag}", f"pyqv{tag}", f"pyqb{tag}"
    steps = [
        ("netns", "add", namespace),
        ("netns", "exec", namespace, "ip", "link", "set", "lo", "up"),
        ("link", "add", link, "type", "veth", "peer", "name", f"pyqp{tag}"),
        ("link", "set", f"pyqp{tag}", "netns", namespace),
        ("link", "add", bridge, "type", "bridge"),
    ]
    try:
        for step in steps:
            done = _ip(*step, check=False)
            if done.returncode != 0:
                why = done.stderr.strip() or f"exit {done.returncode}"
                return f"`ip {' '.join(step[:2])}` failed: {why}"
        return ""
    finally:
        _ip("netns", "delete", namespace, check=False)
        _ip("link", "delete", link, check=False)
        _ip("link", "delete", bridge, check=False)


MODE = detect()


def _tag() -> str:
    """This process's pid in hex and a random byte: at most 8 characters, so that interface
    names (15 at most) fit, and parseable back to the pid for the sweep of leftovers."""
    return f"{os.getpid():x}{random.randrange(256):02x}"


def _sweep() -> None:
    """Delete namespaces and bridges made by test processes that are gone (killed mid-test),
    and kill the workers still running in those namespaces."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = (line.split() or [""])[0]
        if name.startswith("pyrula-h-") and _orphaned(name.split("-")[2]):
            for pid in _ip("netns", "pids", name, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "delete", name, check=False)
    for line in _ip("-o", "link", "show", "type", "bridge", check=False).stdout.splitlines():
        name = line.split(":")[1].strip()
        if name.startswith("pyb") and _orphaned(name[3:]):
            _ip("link", "delete", name, check=False)


def _orphaned(tag: str) -> bool:
    """Whether `tag` (see `_tag`) names a test process that is gone."""
    try:
        return not psutil.pid_exists(int(tag[:-2], 16))
    except ValueError:
        return False  # not one of ours


def _free_subnet() -> str:
    """The first three octets of a 10.x.y.0/24 no route of this namespace touches."""
    taken = _ip("-4", "route", "show", "table", "all", check=False).stdout
    taken += _ip("-4", "addr", check=False).stdout
    for _ in range(200):
        prefix = f"10.{random.randrange(200, 255)}.{random.randrange(256)}"
        if f"{prefix}." not in taken:
            return prefix
    raise RuntimeError("no free private /24 for the test network")


class Network:
    """Where a test's hosts live, and the PostgreSQL server they share (see the module)."""

    def __init__(self, mode: Mode = MODE) -> None:
        self.mode = mode
        self.hosts: list[Host] = []
        self._count = 0
        # No idle_in_transaction_session_timeout of the server's own: what ends a cut-off
        # host's open transaction is the store's setting on its sessions (docs/scaling.md).
        self.pg = server(SERVER)
        if mode.name != "netns":
            self.url = str(self.pg.get_uri())
            self.bridge = ""
            return
        _sweep()
        self.tag = _tag()
        self.bridge = f"pyb{self.tag}"
        self.subnet = _free_subnet()
        self.address = f"{self.subnet}.1"
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            self._listen()
        except BaseException:
            self.close()
            raise
        self.url = f"postgresql://postgres@{self.address}:{PORT}/postgres"

    def _listen(self) -> None:
        """Restart the server listening on the bridge's address as well as its unix socket,
        trusting connections from the subnet."""
        hba = Path(self.pg.pgdata) / "pg_hba.conf"
        with hba.open("a") as rules:
            rules.write(f"host all all {self.subnet}.0/24 trust\n")
        socket_dir = self.pg.get_postmaster_info().socket_dir
        restart(SERVER, how="fast", options=f"-h {self.address} -p {PORT} -k {socket_dir}")

    def host(self, host_id: str) -> Host:
        """A new host called `host_id` (its `PYRULA_HOST_ID`) on this network."""
        self._count += 1
        host = Host(self, host_id, self._count)
        self.hosts.append(host)
        return host

    def close_hosts(self) -> None:
        """Kill every host's processes and delete its namespace."""
        while self.hosts:
            self.hosts.pop().close()

    def close(self) -> None:
        self.close_hosts()
        if self.bridge:
            _ip("link", "delete", self.bridge, check=False)
            self.bridge = ""

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_LEADER = (  # SIGTERM is for the workers (`stop()` signals the whole group); not for it
    "import signal, subprocess, sys\n"
    "signal.signal(signal.SIGTERM, lambda *_: None)\n"
    "workers = [subprocess.Popen(sys.argv[2:]) for _ in range(int(sys.argv[1]))]\n"
    "sys.exit(max(worker.wait() for worker in workers))\n"
)


class Host:
    """One host: a network namespace on the bridge (or nothing, in process-groups mode) and the
    process group of the workers started on it."""

    def __init__(self, network: Network, host_id: str, number: int) -> None:
        self.network = network
        self.host_id = host_id
        self.processes: list[subprocess.Popen[bytes]] = []
        self._log = tempfile.NamedTemporaryFile(prefix=f"pyrula-{host_id}-")  # noqa: SIM115
        self.namespace = ""
        self.link = ""
        if network.mode.name != "netns":
            return
        self.namespace = f"pyrula-h-{network.tag}-{number}"
        self.link = f"pyv{network.tag}{number}"
        peer = f"pyp{network.tag}{number}"
        inside = ["ip", "-n", self.namespace]
        try:
            _ip("netns", "add", self.namespace)
            _ip("link", "add", self.link, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", self.namespace)
            _run(*inside, "link", "set", peer, "name", "eth0")
            _run(*inside, "addr", "add", f"{network.subnet}.{10 + number}/24", "dev", "eth0")
            _run(*inside, "link", "set", "eth0", "up")
            _run(*inside, "link", "set", "lo", "up")
            _ip("link", "set", self.link, "master", network.bridge)
            _ip("link", "set", self.link, "up")
        except BaseException:
            self.close()
            raise

    def start(self, *command: str, count: int = 1) -> subprocess.Popen[bytes]:
        """`count` processes running `command` (argv after `python`) on this host, in one new
        process group whose leader exits with the worst of their exit codes. Their stderr goes
        to `stderr()`."""
        environment = {**os.environ, "PYTHONPATH": str(ROOT), "PYRULA_HOST_ID": self.host_id}
        argv = [sys.executable, "-c", _LEADER, str(count), sys.executable, *command]
        if self.namespace:
            argv = ["ip", "netns", "exec", self.namespace, *argv]
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stderr=self._log,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def stderr(self) -> str:
        """What this host's processes have written to stderr so far."""
        return Path(self._log.name).read_text(errors="replace")

    def wait(self, timeout: float = 180) -> None:
        """Wait for every process started here to exit, and check each exited cleanly."""
        for process in self.processes:
            code = process.wait(timeout)
            assert code == 0, f"{self.host_id} exited {code}; its stderr:\n{self.stderr()}"

    def _signal(self, number: int) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, number)

    def kill(self) -> None:
        """SIGKILL every process of this host at once (the whole host goes)."""
        self._signal(signal.SIGKILL)
        for process in self.processes:
            process.wait(30)

    def stop(self) -> None:
        """SIGTERM every process of this host: workers drain and exit."""
        self._signal(signal.SIGTERM)

    def cut(self) -> None:
        """Cut this host off: its link goes down (netns), or its processes freeze."""
        if self.link:
            _ip("link", "set", self.link, "down")
        else:
            self._signal(signal.SIGSTOP)

    def restore(self) -> None:
        """Bring the host back after `cut()`."""
        if self.link:
            _ip("link", "set", self.link, "up")
        else:
            self._signal(signal.SIGCONT)

    def close(self) -> None:
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(30)
        self.processes.clear()
        self._log.close()
        if self.namespace:
            _ip("netns", "delete", self.namespace, check=False)  # takes its veth pair along
            _ip("link", "delete", self.link, check=False)
            self.namespace = ""


def _run(*argv: str) -> None:
    subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30)
