"""Peak memory of `pyrula proxy` while clients send large request bodies at once.

Starts `pyrula proxy --mode passthrough` (fingerprint and forward; no store) as a subprocess,
routes it to a small upstream on 127.0.0.1 (in this process) that reads each body and answers a
short JSON reply, then sends CONNECTIONS requests of BODY_MIB MiB each (a chat request whose one
message is a long string, as an inline image would be), all at once, and reads the proxy's peak
resident set (`VmHWM`) against its resident set just before (`VmRSS`). Each variant is a fresh
proxy; the first is the baseline, the ratio is against it:

* `unbounded`: every body held in memory as it arrives, and no bound on bodies in memory
  (`--spool-bytes` and `--max-buffered-bytes` at 1 GiB): what the proxy did before bodies were
  spooled;
* `defaults`: the proxy as it starts (bodies past 64 KiB spooled to a temporary file, at most
  128 MiB of bodies in memory at once).

    .venv/bin/python benchmarks/bench_proxy_bodies.py [--connections 20] [--body-mib 30]
        [--variants unbounded,defaults]

Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

VARIANTS = {
    "unbounded": ["--spool-bytes", str(1 << 30), "--max-buffered-bytes", str(1 << 30)],
    "defaults": [],
    "one-at-a-time": ["--max-buffered-bytes", "1"],
}


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        remaining = length
        while remaining:
            remaining -= len(self.rfile.read(min(remaining, 1 << 20)))
        body = json.dumps({"id": "x", "object": "chat.completion", "read": length}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _memory(pid: int) -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found


def _post(port: int, body: bytes, out: list[int]) -> None:
    head = (
        "POST /openai/v1/chat/completions HTTP/1.1\r\nhost: proxy\r\n"
        "content-type: application/json\r\nauthorization: Bearer sk-bench\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(head)
        view = memoryview(body)
        for start in range(0, len(body), 1 << 20):
            sock.sendall(view[start : start + (1 << 20)])
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    out.append(int(reply.split(b" ", 2)[1]))


def _run(variant: str, upstream: str, connections: int, body: bytes) -> tuple[int, list[int]]:
    port = _free_port()
    command = [
        sys.executable, "-m", "pyrula.cli.app", "proxy", "--mode", "passthrough", "--quiet",
        "--listen", f"127.0.0.1:{port}", "--upstream", upstream,
        "--max-body-bytes", str(len(body) + (1 << 20)), *VARIANTS[variant],
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        proxy = subprocess.Popen(command, cwd=folder, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proxy.poll() is not None:
                        problem = proxy.stderr.read()  # type: ignore[union-attr]
                        raise SystemExit(f"the proxy did not start: {problem}") from None
                    time.sleep(0.1)
            _post(port, b'{"model":"m","messages":[]}', [])  # warm up: imports, the client pool
            before = _memory(proxy.pid)["VmRSS"]
            statuses: list[int] = []
            threads = [
                threading.Thread(target=_post, args=(port, body, statuses))
                for _ in range(connections)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            peak = _memory(proxy.pid)["VmHWM"]
        finally:
            proxy.terminate()
            proxy.wait(30)
    return peak - before, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--body-mib", type=int, default=30)
    parser.add_argument("--variants", default="unbounded,defaults")
    args = parser.parse_args()
    text = "a" * (args.body_mib << 20)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"{args.connections} connections x {args.body_mib} MiB bodies, pid {os.getpid()}")
    print(f"{'variant':<12}{'peak over idle':>16}{'ratio':>8}  statuses")
    baseline = None
    for variant in args.variants.split(","):
        added, statuses = _run(variant, upstream, args.connections, body)
        baseline = baseline or added
        counts = {s: statuses.count(s) for s in sorted(set(statuses))}
        print(f"{variant:<12}{added / (1 << 20):>12.0f} MiB{added / baseline:>8.2f}  {counts}")
    server.shutdown()


if __name__ == "__main__":
    main()
