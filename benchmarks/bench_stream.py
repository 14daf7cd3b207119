"""Streaming: time to first chunk while recording a slow SSE stream, and chunk boundaries.

A local HTTP/1.1 server on 127.0.0.1 answers `POST /v1/chat/completions` with 20 OpenAI chat
chunks 50 ms apart (chunked transfer encoding, one SSE event per HTTP chunk), then
`data: [DONE]` 50 ms after the last one. The openai SDK streams it (`stream=True`) through:

* plain httpx (no recorder): the baseline;
* pyrula recording it (`HttpxTransport`, cassette mode "all", default fsync'd store);
* vcrpy recording it (`record_mode="all"`);
* and, for reference, pyrula and vcrpy replaying it.

Time to first chunk (TTFC) is from calling `create()` to the first `ChatCompletionChunk`; total is
to the end of the stream. Then chunk boundaries are checked with a plain `httpx.Client` over
pyrula's transport: the sizes of the raw chunks the caller saw while recording, the frames the
store kept, and the raw chunks a replay yields must be the same sequence.

Run: python benchmarks/bench_stream.py [--rounds 5] [--chunks 20] [--gap-ms 50]
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import vcr
from _common import API_KEY, MODEL, console, fmt_time, header, openai_client, parser, scratch_dir
from rich.table import Table

import pyrula
from pyrula.journal import Exchanges
from pyrula.journal.keys import namespace_prefix

MESSAGES = [{"role": "user", "content": "Count slowly, one word per chunk."}]


def sse_events(chunks: int) -> list[bytes]:
    events = []
    for k in range(chunks):
        if k == 0:
            delta: dict[str, Any] = {"role": "assistant", "content": ""}
        elif k < chunks - 1:
            delta = {"content": f"word{k} "}
        else:
            delta = {}
        chunk = {
            "id": "chatcmpl-stream",
            "object": "chat.completion.chunk",
            "created": 1_750_000_000,
            "model": MODEL,
            "system_fingerprint": "fp_bench",
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": "stop" if k == chunks - 1 else None,
                }
            ],
        }
        events.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


class SlowSSEServer:
    """A threaded HTTP/1.1 server sending each SSE event as its own HTTP chunk, `gap` apart."""

    def __init__(self, events: list[bytes], gap: float) -> None:
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                server.requests += 1
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("transfer-encoding", "chunked")
                self.send_header("x-request-id", "req_stream")
                self.end_headers()
                for k, event in enumerate(events):
                    if k:
                        time.sleep(gap)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def stream_once(client: Any) -> tuple[float, float, list[str]]:
    """(time to first chunk, total time, content deltas) of one streamed completion."""
    started = time.perf_counter()
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    first = None
    contents = []
    for chunk in stream:
        if first is None:
            first = time.perf_counter() - started
        contents.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert first is not None
    return first, time.perf_counter() - started, contents


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--chunks", type=int, default=20)
    args.add_argument("--gap-ms", type=float, default=50.0)
    args.add_argument("--slices", type=int, default=2, help="streams per variant per round")
    opts = args.parse_args()
    header(
        "bench_stream: recording a slow SSE stream",
        opts.rounds,
        chunks=opts.chunks,
        gap_ms=opts.gap_ms,
    )

    events = sse_events(opts.chunks)
    server = SlowSSEServer(events, opts.gap_ms / 1000)
    tmp = scratch_dir("stream", keep=opts.keep)
    store = pyrula.Store(tmp / "store")
    cassette_path = str(tmp / "vcr.yaml")

    def sdk(transport: httpx.BaseTransport | None) -> Any:
        client = openai_client(transport)
        return client.with_options(base_url=server.base_url)

    plain = sdk(None)
    recorded = sdk(pyrula.HttpxTransport(httpx.HTTPTransport()))

    def plain_run() -> tuple[float, float, list[str]]:
        return stream_once(plain)

    def pyrula_record() -> tuple[float, float, list[str]]:
        with pyrula.cassette("stream", mode="all", store=store):
            return stream_once(recorded)

    def vcr_record() -> tuple[float, float, list[str]]:
        with vcr.use_cassette(cassette_path, record_mode="all", filter_headers=["authorization"]):
            return stream_once(plain)

    def pyrula_replay() -> tuple[float, float, list[str]]:
        with pyrula.cassette("stream", mode="none", store=store):
            return stream_once(recorded)

    def vcr_replay() -> tuple[float, float, list[str]]:
        with vcr.use_cassette(cassette_path, record_mode="none"):
            return stream_once(plain)

    live_names = ["plain httpx (no recorder)", "pyrula recording", "vcrpy recording"]
    variants: dict[str, Callable[[], tuple[float, float, list[str]]]] = dict(
        zip(live_names, (plain_run, pyrula_record, vcr_record), strict=True)
    )
    replays = {"pyrula replay": pyrula_replay, "vcrpy replay": vcr_replay}

    # Warm up (and create the recordings the replays use); every path must see the same text.
    expected = plain_run()[2]
    for name, fn in {**variants, **replays}.items():
        got = fn()[2]
        assert got == expected, (name, got, expected)
    served_before_rounds = server.requests

    ttfc: dict[str, list[float]] = {name: [] for name in (*variants, *replays)}
    total: dict[str, list[float]] = {name: [] for name in ttfc}
    names = list(variants)
    for r in range(opts.rounds):
        for s in range(opts.slices):
            k = (r * opts.slices + s) % len(names)
            for name in names[k:] + names[:k]:
                first, whole, _ = variants[name]()
                ttfc[name].append(first)
                total[name].append(whole)
        for name, fn in replays.items():
            for _ in range(opts.slices):
                first, whole, _ = fn()
                ttfc[name].append(first)
                total[name].append(whole)
        console.print(f"  [dim]streams: round {r + 1}/{opts.rounds} done[/dim]")
    live_requests = server.requests - served_before_rounds
    expected_requests = opts.rounds * opts.slices * len(variants)

    base = statistics.median(ttfc[names[0]])
    table = Table(
        title=f"Time to first chunk: {opts.chunks} chunks {opts.gap_ms:g} ms apart "
        f"({len(ttfc[names[0]])} streams per row)",
        title_justify="left",
    )
    for column in ("variant", "TTFC median", "TTFC min … max", "x base TTFC", "total median"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name in ttfc:
        table.add_row(
            name,
            fmt_time(statistics.median(ttfc[name])),
            f"{fmt_time(min(ttfc[name]))} … {fmt_time(max(ttfc[name]))}",
            f"{statistics.median(ttfc[name]) / base:.2f}",
            fmt_time(statistics.median(total[name])),
        )
    console.print(table)
    console.print(
        f"server requests during rounds: {live_requests} (live variants only: "
        f"{expected_requests} expected; replays must add none)"
    )

    # -- chunk boundaries ------------------------------------------------------------------------
    raw = httpx.Client(transport=pyrula.HttpxTransport(httpx.HTTPTransport()))

    def post(client: httpx.Client) -> AbstractContextManager[httpx.Response]:
        return client.stream(
            "POST",
            server.base_url + "/chat/completions",
            json={"model": MODEL, "messages": MESSAGES, "stream": True},
            headers={"authorization": f"Bearer {API_KEY}"},
        )

    def raw_sizes() -> list[int]:
        with post(raw) as response:
            return [len(chunk) for chunk in response.iter_raw()]

    with pyrula.cassette("bounds", mode="all", store=store):
        live = raw_sizes()
    exchanges = Exchanges(store)
    key, _ = next(exchanges.scan(namespace_prefix("bounds")))
    found = exchanges.get(key)
    assert found is not None
    stored = [len(frame) for frame in exchanges.frames(*found)]
    with pyrula.cassette("bounds", mode="none", store=store):
        replayed = raw_sizes()
    plain_raw = httpx.Client()
    bounds_path = str(tmp / "vcr-bounds.yaml")
    with (
        vcr.use_cassette(bounds_path, record_mode="all"),
        post(plain_raw) as response,
    ):
        vcr_live = [len(chunk) for chunk in response.iter_raw()]
    with (
        vcr.use_cassette(bounds_path, record_mode="none"),
        post(plain_raw) as response,
    ):
        vcr_replayed = [len(chunk) for chunk in response.iter_raw()]

    console.print(f"server sent event sizes:  {[len(e) for e in events]}")
    console.print(f"pyrula, live (recording): {live}")
    console.print(f"pyrula, stored frames:    {stored}")
    console.print(f"pyrula, replayed:         {replayed}")
    same = live == stored == replayed
    console.print(
        f"chunk boundaries preserved on replay: [bold]{'YES' if same else 'NO'}[/bold] "
        f"({len(replayed)} chunks)"
    )
    console.print(f"vcrpy, live (recording):  {vcr_live}")
    console.print(f"vcrpy, replayed:          {vcr_replayed}")

    store.close()
    server.close()


if __name__ == "__main__":
    main()
