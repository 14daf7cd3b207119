"""Replay through `pyrula proxy` against in-process replay and `mitmdump --server-replay`.

The same exchanges are recorded in this run by each tool from one local upstream (a stdlib HTTP
server answering realistic chat completions), then the upstream is stopped and every variant
replays them offline:

* in-process: `pyrula.AsyncHttpxTransport(session=Cassette(...)).handle_async_request(...)`
  called directly, C tasks at once: the cost of in-process replay itself, with no HTTP client
  and no socket;
* pyrula proxy: `pyrula proxy --mode replay --quiet` in its own process;
* mitmdump: `mitmdump --mode reverse:URL --server-replay FLOWS` in its own process, with
  `server_replay_reuse`, `server_replay_extra=kill` and `connection_strategy=lazy` so it, too,
  never reaches the upstream.

Both proxies are driven by the same load generator: C keep-alive connections, each opened and
warmed with one untimed request before the clock starts, sending pre-built HTTP/1.1 requests
(distinct prompts, each recorded once) and reading whole replies. It is kept light so that the
proxy, not the client, is measured (httpx's own client costs more per request than the proxy
does). Variants are interleaved round by round. Latencies are per request, pooled over the
rounds; "added" is a variant's latency minus in-process replay's at the same concurrency: the
network hop and the HTTP handling a proxy adds.

Then memory: one 100 MB streamed reply (about 100,000 SSE frames) replayed through the proxy
while its resident memory is sampled: heap (RssAnon) stays flat; the store's pages mapped in by
LMDB show up as RssFile (page cache, reclaimable), reported separately.

Run: python benchmarks/bench_proxy.py [--rounds 3] [--requests 512] [--clients 1,8,64]
         [--big-mb 100] [--mitmdump PATH]
mitmdump is looked up on PATH, then next to this Python; without it that column is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from pyrula.fingerprints import RequestParts, canonicalize
from rich.console import Console
from rich.table import Table

import pyrula
from pyrula.cassette import Cassette
from pyrula.journal.recorder import Reply
from pyrula.journal.store import Store
from pyrula.transport import AsyncHttpxTransport
from pyrula.transport.core import Live

console = Console(width=int(os.environ.get("BENCH_WIDTH", "120")), highlight=False)
PYRULA = [sys.executable, "-c", "from pyrula.cli.app import main; main()", "proxy"]
PATH = "/v1/chat/completions"
API_KEY = "sk-bench-" + "k" * 32
SYSTEM = "You are a terse assistant. Answer in one short paragraph."
FILLER = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly "
    "figures, and nobody is quite sure whether the projections account for seasonal demand. "
)


# -- the exchanges ---------------------------------------------------------------------------------


def request_body(index: int) -> bytes:
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Question {index}: what does the report say about demand?"},
    ]
    return json.dumps({"model": "gpt-4o-mini", "messages": messages, "temperature": 0}).encode()


def reply_body(prompt: bytes) -> bytes:
    digest = hashlib.sha256(prompt).hexdigest()[:12]
    text = (f"Answer {digest}. " + FILLER * 4)[:600]
    return json.dumps(
        {
            "id": f"chatcmpl-{digest}",
            "object": "chat.completion",
            "created": 1_750_000_000,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 31, "completion_tokens": 120, "total_tokens": 151},
            "system_fingerprint": "fp_bench",
        }
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        reply = reply_body(body)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("x-request-id", "req_" + hashlib.sha256(body).hexdigest()[:8])
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@contextlib.contextmanager
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def raw_request(body: bytes) -> bytes:
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {API_KEY}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


# -- the load generator ----------------------------------------------------------------------------


@dataclass
class Slice:
    seconds: float
    latencies: list[float]
    errors: int


async def _read_reply(reader: asyncio.StreamReader) -> tuple[int, int]:
    """(status, body bytes) of one HTTP/1.1 reply, content-length or chunked."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at >= 0:
        end = lower.find(b"\r\n", at + 2)
        length = int(lower[at + 17 : end])
        await reader.readexactly(length)
        return status, length
    total = 0
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        await reader.readexactly(size + 2)
        total += size
        if size == 0:
            return status, total


async def load(
    port: int,
    requests: list[bytes],
    clients: int,
    *,
    warm: bool = True,
    before: Callable[[], None] | None = None,
) -> Slice:
    """Send `requests` over `clients` keep-alive connections; time the lot.

    With `warm`, each connection first carries one untimed request, so the clock measures
    steady keep-alive traffic rather than how fast a server accepts a burst of connections.
    `before` runs after the warm-up, just before the clock starts.
    """
    connections = [await asyncio.open_connection("127.0.0.1", port) for _ in range(clients)]
    latencies: list[float] = []
    errors = 0
    if warm:
        for index, (_, writer) in enumerate(connections):
            writer.write(requests[index % len(requests)])
        for reader, _ in connections:
            await _read_reply(reader)
    if before is not None:
        before()

    async def worker(index: int) -> None:
        nonlocal errors
        reader, writer = connections[index]
        for request in requests[index::clients]:
            started = time.perf_counter()
            writer.write(request)
            status, size = await _read_reply(reader)
            latencies.append(time.perf_counter() - started)
            if status != 200 or not size:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    seconds = time.perf_counter() - started
    for _, writer in connections:
        writer.close()
    return Slice(seconds, latencies, errors)


HEADERS = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}


async def in_process(store: Store, bodies: list[bytes], clients: int) -> Slice:
    """The same requests replayed by pyrula's async httpx transport, called directly.

    No HTTP client and no socket: the cost of in-process replay itself, which is what a proxy
    adds its network hop and HTTP handling to.
    """

    def unreachable(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"in-process replay went to the network: {request.url}")

    session = Cassette("proxy", "none", store=store)  # fresh: counts occurrences from zero
    transport = AsyncHttpxTransport(httpx.MockTransport(unreachable), session=session)
    latencies: list[float] = []
    errors = 0

    async def worker(index: int) -> None:
        nonlocal errors
        for body in bodies[index::clients]:
            started = time.perf_counter()
            request = httpx.Request(
                "POST", "http://127.0.0.1" + PATH, content=body, headers=HEADERS
            )
            reply = await transport.handle_async_request(request)
            content = await reply.aread()
            latencies.append(time.perf_counter() - started)
            if reply.status_code != 200 or not content:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    return Slice(time.perf_counter() - started, latencies, errors)


# -- the processes ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise SystemExit(f"{what} did not start listening on port {port}")


@contextlib.contextmanager
def process(
    command: list[str], port: int, what: str, **kw: Any
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    try:
        wait_listening(port, proc, what)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pyrula_proxy(store: Path, mode: str, port: int, upstream_url: str, **kw: Any) -> Any:
    command = [
        *PYRULA, "--store", str(store), "--mode", mode, "--upstream", upstream_url,
        "--listen", f"127.0.0.1:{port}", "--quiet",
    ]  # fmt: skip
    return process(command, port, "pyrula proxy", **kw)


def mitmdump(binary: str, port: int, upstream_url: str, *options: str) -> Any:
    command = [
        binary, "-q", "--mode", f"reverse:{upstream_url}", "--listen-host", "127.0.0.1",
        "-p", str(port), "--set", "flow_detail=0", *options,
    ]  # fmt: skip
    return process(command, port, "mitmdump")


def find_mitmdump(given: str | None) -> tuple[str | None, str]:
    if given:
        return (given, "") if Path(given).exists() else (None, f"--mitmdump {given} not found")
    found = shutil.which("mitmdump") or str(Path(sys.executable).parent / "mitmdump")
    if Path(found).exists():
        return found, ""
    return None, "mitmdump is not installed (pip install mitmproxy, or pass --mitmdump PATH)"


def post(port: int, path: str) -> None:
    httpx.post(f"http://127.0.0.1:{port}{path}", timeout=10).raise_for_status()


# -- measuring -------------------------------------------------------------------------------------


@dataclass
class Samples:
    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    errors: int = 0

    def add(self, result: Slice, count: int) -> None:
        self.rates.append(count / result.seconds)
        self.latencies.extend(result.latencies)
        self.errors += result.errors

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(
    variants: dict[str, Callable[[], Slice]], rounds: int, count: int
) -> dict[str, Samples]:
    names = list(variants)
    results = {name: Samples() for name in names}
    for name in names:  # warm-up slice, not kept
        variants[name]()
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            results[name].add(variants[name](), count)
    return results


MITM = "mitmdump --server-replay"


def report(
    title: str,
    variants: dict[str, Callable[[int], Slice]],
    levels: list[int],
    args: argparse.Namespace,
    *,
    base: str | None,
    ratio_to: str | None,
) -> Table:
    table = Table(title=title, title_justify="left")
    columns = ["variant", "clients", "req/s", "p50", "p99"]
    if base:
        columns += ["added p50", "added p99"]
    if ratio_to:
        columns.append("req/s vs mitmdump")
    for column in columns:
        table.add_column(column, justify="left" if column == "variant" else "right")
    for clients in levels:
        results = measure(
            {name: functools.partial(fn, clients) for name, fn in variants.items()},
            args.rounds,
            args.requests,
        )
        for name, samples in results.items():
            rate = statistics.median(samples.rates)
            row = [
                name,
                str(clients),
                f"{rate:,.0f}" + (f" ({samples.errors} errors)" if samples.errors else ""),
                ms(samples.percentile(0.5)),
                ms(samples.percentile(0.99)),
            ]
            if base:
                floor = results[base]
                shown = name != base
                for q in (0.5, 0.99):
                    row.append(ms(samples.percentile(q) - floor.percentile(q)) if shown else "")
            if ratio_to:
                row.append(f"{rate / statistics.median(results[ratio_to].rates):.1f}x")
            table.add_row(*row)
        table.add_section()
    return table


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def rss(pid: int) -> dict[str, int]:
    """Resident memory of a process in bytes: total, heap-like (anon) and file-backed."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def record_big_stream(store_path: Path, megabytes: int) -> tuple[bytes, str, int]:
    """Record one streamed reply of about `megabytes` MB; (request body, sha256, bytes)."""
    body = json.dumps(
        {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "big"}]}
    ).encode()
    piece = (FILLER * 8)[:900]
    frames: list[bytes] = []
    digest = hashlib.sha256()
    size = 0
    target = megabytes * 1_000_000
    index = 0
    while size < target:
        chunk = {
            "id": "chatcmpl-big",
            "choices": [{"index": 0, "delta": {"content": piece}}],
            "n": index,
        }
        frame = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        frames.append(frame)
        digest.update(frame)
        size += len(frame)
        index += 1
    finish = (
        b'data: {"id":"chatcmpl-big","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    )
    for frame in (finish, b"data: [DONE]\n\n"):
        frames.append(frame)
        digest.update(frame)
        size += len(frame)
    with Store(store_path, max_record_bytes=size * 2) as store:
        parts = RequestParts("POST", "http://127.0.0.1" + PATH, {}, body)
        canonical = canonicalize(parts)
        plan = Cassette("proxy", "all", store=store).plan(parts, canonical)
        assert isinstance(plan, Live) and plan.sink is not None
        plan.sink.complete(
            Reply(200, [("content-type", "text/event-stream")], frames, 0.0, streamed=True)
        )
    return body, digest.hexdigest(), size


def stream_big(port: int, body: bytes, pid: int) -> dict[str, Any]:
    """Read the big reply through the proxy, sampling its memory; discard the bytes."""
    samples: list[dict[str, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(rss(pid))
            stop.wait(0.01)

    before = rss(pid)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    digest = hashlib.sha256()
    size = 0
    first = 0.0
    with httpx.Client(timeout=120) as client:
        client.get(f"http://127.0.0.1:{port}/_pyrula/health")  # connect before the clock starts
        started = time.perf_counter()
        with client.stream("POST", f"http://127.0.0.1:{port}{PATH}", content=body) as reply:
            for chunk in reply.iter_raw():
                if not first:
                    first = time.perf_counter() - started
                digest.update(chunk)
                size += len(chunk)
        seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    return {
        "before": before,
        "peak_anon": max(s["RssAnon"] for s in samples),
        "peak_file": max(s["RssFile"] for s in samples),
        "peak_rss": max(s["VmRSS"] for s in samples),
        "sha256": digest.hexdigest(),
        "bytes": size,
        "seconds": seconds,
        "first": first,
    }


# -- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (default 3)")
    parser.add_argument("--requests", type=int, default=512, help="requests per slice (512)")
    parser.add_argument("--clients", default="1,8,64", help="concurrency levels (1,8,64)")
    parser.add_argument("--big-mb", type=int, default=100, help="streamed reply size (100 MB)")
    parser.add_argument("--mitmdump", default=None, help="path to mitmdump")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    mitm, why_not = find_mitmdump(args.mitmdump)

    console.rule("[bold]pyrula proxy: replay throughput, latency and memory")
    facts = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "pyrula": pyrula.__version__,
        "httpx": httpx.__version__,
        "rounds": args.rounds,
        "requests/slice": args.requests,
    }
    if mitm:
        facts["mitmdump"] = (
            subprocess.run([mitm, "--version"], capture_output=True, text=True, check=False)
            .stdout.split("\n")[0]
            .split()[-1]
        )
    console.print(", ".join(f"{k} {v}" for k, v in facts.items()))
    if not mitm:
        console.print(f"[yellow]mitmdump column skipped: {why_not}[/]")

    bodies = [request_body(i) for i in range(args.requests)]
    requests = [raw_request(b) for b in bodies]
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        work = Path(tmp)
        store_path = work / "store"
        flows = work / "flows.mitm"
        pyrula_port, mitm_port = free_port(), free_port()

        # Record the same exchanges with each tool, from the same upstream.
        with upstream() as url:
            with pyrula_proxy(store_path, "record", pyrula_port, url):
                recorded = asyncio.run(load(pyrula_port, requests, 8, warm=False))
            console.print(
                f"recorded {len(requests)} exchanges through pyrula proxy "
                f"({len(requests) / recorded.seconds:,.0f}/s, each committed to disk)"
            )
            if mitm:
                with mitmdump(mitm, mitm_port, url, "-w", str(flows)):
                    asyncio.run(load(mitm_port, requests, 8, warm=False))
                console.print(f"recorded {len(requests)} exchanges through mitmdump -w")
            offline_url = url  # stopped below: any replay that reaches it fails
        console.print("upstream stopped: every variant below replays offline")

        store = Store(store_path)
        with contextlib.ExitStack() as stack:
            stack.enter_context(pyrula_proxy(store_path, "replay", pyrula_port, offline_url))
            if mitm:
                replay_options = [
                    *("--server-replay", str(flows)),
                    *("--set", "server_replay_reuse=true"),
                    *("--set", "server_replay_extra=kill"),
                    *("--set", "connection_strategy=lazy"),
                ]
                stack.enter_context(mitmdump(mitm, mitm_port, offline_url, *replay_options))
            # After each warm-up, so that every slice replays each request's first recording.
            reset = functools.partial(post, pyrula_port, "/_pyrula/reset")

            variants: dict[str, Callable[[int], Slice]] = {
                "in-process": lambda c: asyncio.run(in_process(store, bodies, c)),
                "pyrula proxy": lambda c: asyncio.run(load(pyrula_port, requests, c, before=reset)),
            }
            if mitm:
                variants[MITM] = lambda c: asyncio.run(load(mitm_port, requests, c))
            console.print(
                report(
                    f"Replay of {args.requests} distinct recorded chat completions per slice; "
                    "added = variant minus in-process at the same concurrency",
                    variants,
                    levels,
                    args,
                    base="in-process",
                    ratio_to=MITM if mitm else None,
                )
            )

        # Memory while replaying one big streamed reply.
        if args.big_mb:
            console.print(f"recording one {args.big_mb} MB streamed reply (written directly)...")
            body, expected, size = record_big_stream(store_path, args.big_mb)
            store.close()
            with pyrula_proxy(store_path, "replay", pyrula_port, offline_url) as proc:
                time.sleep(0.5)
                result = stream_big(pyrula_port, body, proc.pid)
            base = result["before"]
            mib = 1 << 20
            memory = Table(
                title=f"Proxy process memory while replaying a {size / 1e6:,.0f} MB streamed reply",
                title_justify="left",
            )
            for column in ("", "before", "peak during replay", "growth"):
                memory.add_column(column, justify="right")
            for label, key, peak in (
                ("heap (RssAnon)", "RssAnon", result["peak_anon"]),
                ("mapped store pages (RssFile)", "RssFile", result["peak_file"]),
                ("total (VmRSS)", "VmRSS", result["peak_rss"]),
            ):
                memory.add_row(
                    label,
                    f"{base[key] / mib:,.1f} MiB",
                    f"{peak / mib:,.1f} MiB",
                    f"{(peak - base[key]) / mib:+,.1f} MiB",
                )
            console.print(memory)
            same = result["sha256"] == expected and result["bytes"] == size
            console.print(
                f"{result['bytes'] / 1e6:,.1f} MB in {result['seconds']:.2f} s "
                f"({result['bytes'] / 1e6 / result['seconds']:,.0f} MB/s), first byte after "
                f"{ms(result['first'])}; bytes identical to the recording: {same}"
            )
            if not same:
                raise SystemExit("the replayed stream differs from the recording")


if __name__ == "__main__":
    main()
