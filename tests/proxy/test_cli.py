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

from tests.fakes.clock import wait_until
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
            with popen.stderr as stream:  # closed at the proxy's end: no descriptor leaks
                for line in stream:
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
def pyrula_proxy(*args: str, listen: str | None = "127.0.0.1:0") -> Iterator[Proc]:
    where = ["--listen", listen] if listen is not None else []
    popen = subprocess.Popen(
        [*PYRULA, "proxy", *where, *args],
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


def _banner_routes(proc: Proc) -> list[str]:
    """The banner's routes: its `routes` line and the lines under it, up to `stop`."""
    wait_until(lambda: any(line.startswith("  stop ") for line in proc.lines), "the banner")
    start = next(i for i, line in enumerate(proc.lines) if line.startswith("  routes "))
    end = next(i for i, line in enumerate(proc.lines) if line.startswith("  stop "))
    return [line[12:] for line in proc.lines[start:end]]


BUILT_IN = "openai, anthropic, gemini, mistral, groq, xai, deepseek, openrouter, together, ollama"


def test_the_banner_lists_the_routes_given_and_names_the_built_in_ones_in_one_line():
    given = ("--route", "vllm=http://gpu-box:8000")
    with pyrula_proxy("--mode", "passthrough", *given) as proc:
        assert _banner_routes(proc) == [
            f"{proc.url}/vllm/ -> http://gpu-box:8000",
            f"built in: {proc.url}/<name>/ for {BUILT_IN} (--verbose: their upstreams)",
        ]
    with pyrula_proxy("--mode", "passthrough") as proc:
        assert _banner_routes(proc) == [
            f"{proc.url}/<name>/ for {BUILT_IN}, vllm (--verbose: their upstreams)"
        ]


def test_the_banner_lists_every_route_with_verbose():
    with pyrula_proxy("--mode", "passthrough", "--route", "vllm=http://gpu-box:8000", "-v") as p:
        routes = _banner_routes(p)
    assert len(routes) == 11
    assert routes[0] == f"{p.url}/openai/     -> https://api.openai.com"
    assert routes[-1] == f"{p.url}/vllm/       -> http://gpu-box:8000"


def test_the_banner_lists_an_upstream_and_its_routes_and_no_built_in_one():
    upstream = ("--upstream", "http://localhost:11434", "--route", "x=http://a.example")
    with pyrula_proxy("--mode", "passthrough", *upstream) as proc:
        assert _banner_routes(proc) == [
            f"{proc.url}/x/ -> http://a.example",
            f"{proc.url}/*  -> http://localhost:11434",
        ]


def test_host_and_port_say_where_to_listen_as_listen_does():
    where = ("--host", "127.0.0.1", "--port", "0")
    with pyrula_proxy("--mode", "passthrough", *where, listen=None) as proc:
        assert proc.url.startswith("http://127.0.0.1:") and not proc.url.endswith(":8787")
    clash = subprocess.run(
        [*PYRULA, "proxy", "--mode", "passthrough", "--listen", "127.0.0.1:8787", "--port", "9"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )
    assert clash.returncode == 2
    assert "--port 9 and --listen 127.0.0.1:8787 name different addresses" in clash.stderr


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
