"""`pyrula proxy` as a process: banner, `pyrula journal` on its store while it runs, signals."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.fakes.openai_api import SSE_HEADERS, chat_chunks
from tests.fakes.server import Script, Server

PYRULA = [sys.executable, "-c", "from pyrula.cli.app import main; main()"]
CHAT = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'


class Proc:
    def __init__(self, popen: subprocess.Popen[str]) -> None:
        self.popen = popen
        self.lines: list[str] = []
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            assert popen.stderr is not None
            for line in popen.stderr:
                self.lines.append(line.rstrip("\n"))
                found = re.search(r"listening on (http://\S+)", line)
                if found:
                    self.url = found.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(30)

    @property
    def log(self) -> str:
        return "\n".join(self.lines)


@contextmanager
def pyrula_proxy(*args: str) -> Iterator[Proc]:
    popen = subprocess.Popen(
        [*PYRULA, "proxy", "--listen", "127.0.0.1:0", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        proc = Proc(popen)
        assert proc.url, f"the proxy did not start:\n{proc.log}"
        yield proc
    finally:
        if popen.poll() is None:
            popen.kill()
        popen.wait(10)


def refuses_connections(url: str, within: float = 10.0) -> bool:
    host, port = url.removeprefix("http://").split(":")
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
        except ConnectionRefusedError:
            return True
        time.sleep(0.05)
    return False


def journal_ls(store: Path) -> list[dict]:
    out = subprocess.run(
        [*PYRULA, "journal", "ls", "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_sigterm_lets_a_stream_in_flight_finish_and_record_while_journal_reads_the_store(tmp_path):
    store = tmp_path / "store"
    gate = threading.Event()
    frames = chat_chunks(["slow", " reply"])
    script = Script(headers=SSE_HEADERS, frames=frames, chunked=True, gate=gate)
    with (
        Server(lambda seen: script) as upstream,
        pyrula_proxy("--store", str(store), "--mode", "record", "--upstream", upstream.url) as proc,
        httpx.Client(timeout=20) as http,
    ):
        assert "mode      record" in proc.log and str(store.resolve()) in proc.log
        gate.set()
        first = http.post(proc.url + "/v1/chat/completions", content=CHAT)
        assert first.content == b"".join(frames)
        # `pyrula journal` reads the store while the proxy holds it open
        [entry] = journal_ls(store)
        assert entry["namespace"] == "proxy" and entry["streamed"]
        gate.clear()
        with http.stream("POST", proc.url + "/v1/chat/completions", content=CHAT + b" ") as reply:
            chunks = reply.iter_raw()
            assert next(chunks) == frames[0]
            proc.popen.send_signal(signal.SIGTERM)
            assert refuses_connections(proc.url)  # no longer accepting...
            assert proc.popen.poll() is None  # ...but still finishing the exchange in flight
            gate.set()
            rest = b"".join(chunks)
        assert frames[0] + rest == b"".join(frames)
        assert proc.popen.wait(15) == 0
    assert len(journal_ls(store)) == 2
    assert "recorded" in proc.log and "stopped" in proc.log


def test_sigint_after_the_grace_period_drops_the_unfinished_record(tmp_path):
    store = tmp_path / "store"
    gate = threading.Event()
    script = Script(headers=SSE_HEADERS, frames=chat_chunks(["never"]), chunked=True, gate=gate)
    with (
        Server(lambda seen: script) as upstream,
        pyrula_proxy(
            "--store", str(store), "--mode", "record", "--upstream", upstream.url, "--grace", "0.5"
        ) as proc,
        httpx.Client(timeout=20) as http,
    ):
        with http.stream("POST", proc.url + "/v1/chat/completions", content=CHAT) as reply:
            chunks = reply.iter_raw()
            next(chunks)
            proc.popen.send_signal(signal.SIGINT)
            with pytest.raises(httpx.RemoteProtocolError):
                b"".join(chunks)  # cut at the end of the grace period
        assert proc.popen.wait(15) == 0
        gate.set()
    assert journal_ls(store) == []
    assert "dropping their recordings" in proc.log


def test_a_public_address_without_a_token_is_refused_with_the_fix(tmp_path):
    result = subprocess.run(
        [*PYRULA, "proxy", "--store", str(tmp_path), "--listen", "0.0.0.0:0", "--allow-remote"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1
    assert "token" in result.stderr and "PYRULA_PROXY_TOKEN" in result.stderr


def test_proxy_config_takes_a_str_store_path():
    from pyrula.proxy.config import ProxyConfig

    config = ProxyConfig(store=".pyrula")
    assert config.store == Path(".pyrula")
