"""Recording throughput: 1,000 distinct chat completions recorded through the openai SDK.

Variants, each making the same 1,000 distinct calls per round (one cassette per round):

* floor: the SDK over a bare `httpx.MockTransport` (no recorder);
* pyrula: `HttpxTransport` over the same MockTransport, a fresh cassette in mode "once" on the
  default `Store` (fsync on every committed exchange: each call is on disk when it returns);
* pyrula with `Store(sync=False)`, to show what the per-exchange fsync costs;
* vcrpy: `use_cassette(<temp YAML>, record_mode="all")` (it patches
  `httpx.MockTransport.handle_request`), including writing the YAML when the block ends.

A second table records against a live provider on loopback instead: a server in its own process on
127.0.0.1 (HTTP/1.1, keep-alive) answers every chat completion. Its floor is the same calls with no
recorder, over the network stack's own transport; pyrula records each one on the default `Store`
(fsync per committed exchange), on `Store(metasync=False)` when this pyrula has it (one device flush
per commit; see docs/runs.md) and on `Store(sync=False)` (no flush: the recording's own cost). Both
with a raw `httpx.Client` posting the request bytes (no SDK: the transport's own cost) and through
the openai SDK. `--no-loopback` skips it. Beside them, in the same rounds, the disk alone: one 4 KiB
overwrite + `os.fsync` per call in the stores' folder, and one exchange's commit as LMDB writes it
(one 4 KiB page per write request the disk took for each of the default store's recorded exchanges,
counted at the device, at scattered offsets, one `fdatasync`, then the meta page through an O_DSYNC
descriptor), and the same pages written in one run instead (what a layout that appended each
commit's pages would flush). The lines under each table say what the flushes cost (the fsync row
less the sync=False row) and the floor that pattern puts under the ratio before any CPU.

`--callgrind CALLS` also counts the instructions of CALLS loopback calls per variant under
valgrind (one child process, after a warm-up; the server runs natively), so the recording's CPU
per exchange is read against the live call's without the machine's load. `--before REF` runs that
child on the pyrula of git revision REF as well (`git archive`, imported ahead of the installed
package) and sets each recording's added instructions before and now side by side.

Run: python benchmarks/bench_record.py [--rounds 5] [--calls 1000] [--no-loopback]
     [--only-loopback] [--callgrind CALLS] [--only-callgrind] [--before REF]
"""

from __future__ import annotations

import functools
import gc
import inspect
import itertools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import vcr
from _common import (
    API_KEY,
    CALLGRIND_CHILD,
    MODEL,
    before_tree,
    callgrind_segments,
    cg_mark,
    completion_json,
    console,
    header,
    instructions_table,
    json_response,
    openai_client,
    parser,
    rate_table,
    run_rounds,
    scratch_dir,
    text_of,
)
from _disk_floors import (
    COMMIT,
    CONTIGUOUS,
    FLUSH,
    commit_pattern,
    flush_floor,
    writes_per_commit,
)

import pyrula
from pyrula.journal.lmdb_store import LmdbStore

BODY = completion_json(text_of(300, "Recorded answer."))


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--calls", type=int, default=1000)
    args.add_argument("--no-loopback", action="store_true", help="skip the live loopback rows")
    args.add_argument("--only-loopback", action="store_true", help="only the live loopback rows")
    args.add_argument(
        "--callgrind",
        type=int,
        default=0,
        metavar="CALLS",
        help="also count instructions per loopback call, CALLS calls per variant (valgrind)",
    )
    args.add_argument("--only-callgrind", action="store_true", help="only the callgrind rows")
    args.add_argument(
        "--before", metavar="REF", help="the callgrind rows also count this git revision's pyrula"
    )
    args.add_argument(
        "--paired-slice",
        type=int,
        default=50,
        metavar="CALLS",
        help="the paired rows' slice: live and recorded calls alternate every CALLS (0: skip)",
    )
    opts = args.parse_args()
    n: int = opts.calls
    header("bench_record: record 1,000 chat completions", opts.rounds, calls=n)
    if opts.only_callgrind:
        print_instructions(
            opts.callgrind or 100, scratch_dir("record", keep=opts.keep), opts.before
        )
        return
    if opts.only_loopback:
        tmp = scratch_dir("record", keep=opts.keep)
        loopback(n, opts.rounds, tmp, opts.paired_slice)
        if opts.callgrind:
            print_instructions(opts.callgrind, tmp, opts.before)
        return

    upstream_calls = 0

    def provider(request: httpx.Request) -> httpx.Response:
        nonlocal upstream_calls
        upstream_calls += 1
        return json_response(BODY)

    floor_client = openai_client(httpx.MockTransport(provider))
    pyrula_client = openai_client(pyrula.HttpxTransport(httpx.MockTransport(provider)))
    question = itertools.count()

    def calls(client: Any) -> None:
        for _ in range(n):
            content = f"Question {next(question)}: summarise the attached quarterly figures."
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": content}]
            )

    tmp = scratch_dir("record", keep=opts.keep)
    synced = pyrula.Store(tmp / "synced")  # the default: fsync per committed exchange
    unsynced = pyrula.Store(tmp / "unsynced", sync=False)
    cassettes = itertools.count()
    recorded: dict[str, int] = {}

    def pyrula_record(store: pyrula.Store) -> Callable[[], int]:
        def run() -> int:
            name = f"record-{next(cassettes)}"
            with pyrula.cassette(name, mode="once", store=store) as cas:
                calls(pyrula_client)
            recorded[name] = cas.stats.recorded
            return n

        return run

    def floor() -> int:
        calls(floor_client)
        return n

    vcr_files: list[Path] = []

    def vcr_record() -> int:
        path = tmp / f"vcr-{len(vcr_files)}.yaml"
        vcr_files.append(path)
        with vcr.use_cassette(str(path), record_mode="all", filter_headers=["authorization"]):
            calls(floor_client)
        return n

    floor_name = "floor: bare MockTransport"
    main_name = "pyrula: default Store (fsync)"
    vcr_name = "vcrpy: record_mode=all"
    variants = {
        floor_name: floor,
        main_name: pyrula_record(synced),
        "pyrula: Store(sync=False)": pyrula_record(unsynced),
        vcr_name: vcr_record,
    }
    for fn in variants.values():  # warm up
        fn()
    results = run_rounds(variants, opts.rounds, label="record")

    console.print(
        rate_table(f"Recording {n:,} distinct chat completions per round", results, floor_name)
    )
    base, row, vrow = results[floor_name], results[main_name], results[vcr_name]
    console.print(
        f"pyrula/floor = {row.wall_median / base.wall_median:.2f} wall, "
        f"{row.cpu_median / base.cpu_median:.2f} CPU; "
        f"vcr/floor = {vrow.wall_median / base.wall_median:.2f} wall, "
        f"{vrow.cpu_median / base.cpu_median:.2f} CPU; "
        f"pyrula/vcr = {row.wall_median / vrow.wall_median:.2f} wall"
    )
    unsynced_row = results["pyrula: Store(sync=False)"]
    console.print(
        f"per recorded call: pyrula adds {(row.wall_median - base.wall_median) * 1e3:.2f} ms wall, "
        f"of which the fsync'd commit is "
        f"{(row.wall_median - unsynced_row.wall_median) * 1e3:.2f} ms; "
        f"CPU added without fsync {(unsynced_row.cpu_median - base.cpu_median) * 1e6:.0f} µs"
    )
    bad = {k: v for k, v in recorded.items() if v != n}
    interactions = [p.read_text().count("\n- request:") for p in vcr_files]
    console.print(
        f"check: {len(recorded)} pyrula cassettes of {n} recordings each"
        f"{'' if not bad else f' (MISMATCH {bad})'}; "
        f"vcrpy cassettes hold {sorted(set(interactions))} interactions; "
        f"store entries {synced.stat()['entries']['exchanges']:,} + "
        f"{unsynced.stat()['entries']['exchanges']:,}"
    )
    synced.close()
    unsynced.close()
    if not opts.no_loopback:
        loopback(n, opts.rounds, tmp, opts.paired_slice)
        if opts.callgrind:
            print_instructions(opts.callgrind, tmp, opts.before)


# -- live loopback ---------------------------------------------------------------------------------


def serve() -> None:
    """The loopback provider (run in its own process): every POST gets BODY; prints its port."""
    import socket
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("x-request-id", "req_bench")
            self.send_header("content-length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()


def start_server() -> tuple[subprocess.Popen[str], str]:
    """The loopback provider in its own process, and its base URL."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, f"http://127.0.0.1:{int(server.stdout.readline())}/v1"


def loopback(n: int, rounds: int, tmp: Path, every: int) -> None:
    server, base_url = start_server()
    try:
        _loopback_rounds(n, rounds, tmp, base_url, every)
    finally:
        server.kill()
        server.wait()


def store_policies() -> dict[str, dict[str, bool]]:
    """The stores the loopback rows record into, by label: the default (fsync), the opt-in
    one-flush commit when this pyrula has it, and no flush at all (the recording's own cost)."""
    policies: dict[str, dict[str, bool]] = {"fsync": {}}
    if "metasync" in inspect.signature(LmdbStore).parameters:
        policies["metasync=False"] = {"metasync": False}
    policies["sync=False"] = {"sync": False}
    return policies


def _loopback_setup(n: int, tmp: Path, base_url: str) -> tuple[list[Loopback], list[Any]]:
    """Per client (raw `httpx.Client`, openai SDK), its `Loopback` variants; and the stores,
    to close."""
    import openai

    question = itertools.count()
    headers = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}
    url = base_url + "/chat/completions"

    def raw_calls(client: httpx.Client, count: int = n) -> int:
        for _ in range(count):
            content = f"Question {next(question)}: summarise the attached quarterly figures."
            body = json.dumps({"messages": [{"role": "user", "content": content}], "model": MODEL})
            assert client.post(url, content=body.encode(), headers=headers).content == BODY
        return n

    def sdk_calls(client: Any, count: int = n) -> int:
        for _ in range(count):
            content = f"Question {next(question)}: summarise the attached quarterly figures."
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": content}]
            )
        return n

    def sdk(transport: httpx.BaseTransport) -> openai.OpenAI:
        return openai_client(transport, base_url=base_url)

    stores = {
        policy: pyrula.Store(tmp / f"loop-{index}", **options)
        for index, (policy, options) in enumerate(store_policies().items())
    }
    cassettes = itertools.count()
    raw_floor = httpx.Client(transport=httpx.HTTPTransport())
    raw_pyrula = httpx.Client(transport=pyrula.HttpxTransport(httpx.HTTPTransport()))
    sdk_floor = sdk(httpx.HTTPTransport())
    sdk_pyrula = sdk(pyrula.HttpxTransport(httpx.HTTPTransport()))

    def recording(calls: Callable[[Any], int], client: Any, store: Any) -> Callable[[], int]:
        def run() -> int:
            with pyrula.cassette(f"loop-{next(cassettes)}", mode="once", store=store) as cas:
                calls(client)
            assert cas.stats.recorded == n, cas.stats.recorded
            return n

        return run

    def paired(calls: Callable[..., int], floor_client: Any, client: Any) -> Callable[[int], Pair]:
        def run(every: int) -> Pair:
            """One cassette of n recordings on the default store, and n live calls with no
            recorder, alternating every `every` calls (which goes first alternates too)."""
            assert n % every == 0, f"--paired-slice {every} does not divide --calls {n}"
            gc.collect()
            live = recorded = 0.0
            opened = time.perf_counter()
            with pyrula.cassette(f"loop-{next(cassettes)}", mode="once", store=stores["fsync"]):
                recorded += time.perf_counter() - opened
                for index in range(n // every):
                    for recording_turn in (False, True) if index % 2 == 0 else (True, False):
                        started = time.perf_counter()
                        calls(client if recording_turn else floor_client, every)
                        if recording_turn:
                            recorded += time.perf_counter() - started
                        else:
                            live += time.perf_counter() - started
                closing = time.perf_counter()
            recorded += time.perf_counter() - closing  # the block's end: its last fold
            return Pair(live / n, recorded / n)

        return run

    def loopback(
        label: str, calls: Callable[..., int], floor_client: object, client: object
    ) -> Loopback:
        floor = functools.partial(calls, floor_client)
        recorders = {policy: recording(calls, client, store) for policy, store in stores.items()}
        return Loopback(label, floor, recorders, paired(calls, floor_client, client))

    clients = [
        loopback("raw httpx.Client", raw_calls, raw_floor, raw_pyrula),
        loopback("openai SDK", sdk_calls, sdk_floor, sdk_pyrula),
    ]
    return clients, list(stores.values())


class Pair(NamedTuple):
    """One round of `Loopback.paired`: wall seconds per call, live and recorded."""

    live: float
    recorded: float


class Loopback(NamedTuple):
    """One client's loopback variants: its floor (n live calls, no recorder), n live calls
    recorded per store policy, and the paired round (`paired(every)`: both in one block)."""

    label: str
    floor: Callable[[], int]
    recorders: dict[str, Callable[[], int]]
    paired: Callable[[int], Pair]


def per_round_ratio(row: list[float], base: list[float]) -> str:
    """The median of a variant's wall time over the floor's, round by round (each round runs
    both minutes apart at most, so a slow spell of the machine weighs on both), and the range."""
    ratios = sorted(r / b for r, b in zip(row, base, strict=True))
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def print_paired(label: str, pairs: list[Pair], every: int, n: int) -> None:
    recorded, live = [p.recorded for p in pairs], [p.live for p in pairs]
    console.print(
        f"paired, {label}: the live calls and the default store's recording alternating every "
        f"{every} calls within each round's cassette of {n:,} (both timed in the same seconds): "
        f"recording over live, each round {per_round_ratio(recorded, live)} (live "
        f"{statistics.median(live) * 1e3:.2f} ms, recorded "
        f"{statistics.median(recorded) * 1e3:.2f} ms a call) \\[target <= 2x]"
    )


def _loopback_rounds(n: int, rounds: int, tmp: Path, base_url: str, every: int) -> None:
    clients, stores = _loopback_setup(n, tmp, base_url)
    flushes = flush_floor(n, tmp)
    for label, floor, recorders, paired in clients:
        floor_name = f"floor: live loopback, {label}, no recorder"
        variants: dict[str, Callable[[], int]] = {floor_name: floor}
        for policy, fn in recorders.items():
            variants[f"pyrula recording, Store {policy}"] = fn
        for fn in variants.values():  # warm up (connections, pages)
            fn()
        writes = writes_per_commit(recorders["fsync"], tmp)
        variants[FLUSH] = flushes
        if writes is not None:
            pages = max(2, round(writes.requests))
            variants[COMMIT] = commit_pattern(n, tmp, pages)
            variants[CONTIGUOUS] = commit_pattern(n, tmp, pages, contiguous=True)
        for name in (FLUSH, COMMIT, CONTIGUOUS):
            if name in variants:
                variants[name]()
        results = run_rounds(variants, rounds, label=f"loopback {label}")
        console.print(
            rate_table(
                f"Recording {n:,} distinct chat completions per round from a live loopback "
                f"provider, {label}",
                results,
                floor_name,
            )
        )
        base = results[floor_name]
        console.print(
            ", ".join(
                f"{name}: {row.wall_median / base.wall_median:.2f}x floor wall "
                f"({(row.wall_median - base.wall_median) * 1e3:.2f} ms added per call)"
                for name, row in results.items()
                if name not in (floor_name, FLUSH, COMMIT, CONTIGUOUS)
            )
            + " \\[target <= 2x]"
        )
        console.print(
            "the same, each round's recording over that round's floor (median, then the "
            "spread): "
            + ", ".join(
                f"{name}: {per_round_ratio(row.wall, base.wall)}"
                for name, row in results.items()
                if name not in (floor_name, FLUSH, COMMIT, CONTIGUOUS)
            )
        )
        call = base.wall_median
        synced = results["pyrula recording, Store fsync"].wall_median
        unsynced = results["pyrula recording, Store sync=False"].wall_median
        console.print(
            f"the commit's flushes: the fsync row less the sync=False row is "
            f"{(synced - unsynced) * 1e3:.2f} ms per call (one flush of one 4 KiB page took "
            f"{results[FLUSH].wall_median * 1e3:.2f} ms); with no CPU of its own a recording "
            f"would still cost {(call + synced - unsynced) / call:.2f}x the live call"
        )
        if COMMIT in results and writes is not None:
            pattern = results[COMMIT].wall_median
            console.print(
                f"why: each recorded exchange took {writes.requests:.1f} write requests of the "
                f"disk, {writes.pages:.1f} pages of 4 KiB (the device's counts: its append to "
                f"the pending log and its share of the block's batched commits, "
                f"docs/record-format.md#pending-recordings). As scattered pages (one per "
                f"request, one flush, then the meta page; the "
                f"'{COMMIT}' row) took {pattern * 1e3:.2f} ms a commit against "
                f"{call * 1e3:.2f} ms for the live call: a floor of "
                f"{(call + pattern) / call:.2f}x before any CPU. The same pages written in one "
                f"run took {results[CONTIGUOUS].wall_median * 1e3:.2f} ms"
            )
        if every:
            pairs = []
            for r in range(rounds):
                pairs.append(paired(every))
                console.print(f"  [dim]paired {label}: round {r + 1}/{rounds} done[/dim]")
            print_paired(label, pairs, every, n)
    for store in stores:
        store.close()


# -- instruction counts ----------------------------------------------------------------------------


def callgrind_child(folder: str, calls: str) -> None:
    """Under callgrind: each loopback variant once to warm up, then once more between marks."""
    server, base_url = start_server()
    try:
        clients, stores = _loopback_setup(int(calls), Path(folder), base_url)
        segments = [fn for c in clients for fn in (c.floor, *c.recorders.values())]
        for fn in segments:
            fn()
        cg_mark()
        for fn in segments:
            fn()
            cg_mark()
        for store in stores:
            store.close()
    finally:
        server.kill()
        server.wait()


def print_instructions(calls: int, folder: Path, before: str | None = None) -> None:
    """The callgrind rows; with `before` (a git revision), the same child first runs that
    revision's pyrula, and each recording's added instructions are set side by side."""
    trees: dict[str, Path | None] = {"now": None}
    if before is not None:
        trees = {f"before ({before})": before_tree(before, folder), **trees}
    stores = list(store_policies())
    added: dict[str, dict[str, float]] = {}
    for which, tree in trees.items():
        console.print(f"  [dim]callgrind: the loopback variants under valgrind, {which}[/dim]")
        stores_at = folder / f"cg-{'now' if tree is None else 'before'}"
        counts = iter(callgrind_segments(__file__, str(stores_at), str(calls), tree=tree))
        for label in ("raw httpx.Client", "openai SDK"):
            floor_name = f"floor: live loopback, {label}, no recorder"
            per_op = {floor_name: next(counts) / calls}
            for policy in stores:
                per_op[f"pyrula recording, Store {policy}"] = next(counts) / calls
            title = (
                f"instructions per call (callgrind, {calls} calls after warm-up; this process "
                f"only: the loopback server runs natively in its own), {label}, pyrula {which}"
            )
            console.print(instructions_table(title, per_op, floor_name))
            for name, count in per_op.items():
                if name != floor_name:
                    added.setdefault(f"{label}, {name}", {})[which] = count - per_op[floor_name]
    if before is not None:
        for name, by_tree in added.items():
            was, now = by_tree.values()
            console.print(f"{name}: adds {was / 1e3:+,.0f}k before, {now / 1e3:+,.0f}k now")


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    elif sys.argv[1:2] == [CALLGRIND_CHILD]:
        callgrind_child(sys.argv[2], sys.argv[3])
    else:
        main()
