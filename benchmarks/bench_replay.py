"""Replay throughput: one recorded chat completion replayed 1,000 times through the openai SDK.

Variants (all on the httpx stack, `openai.OpenAI(http_client=httpx.Client(transport=...))`):

* floor: the SDK over a bare `httpx.MockTransport` returning the same JSON (no recorder at all);
* pyrula, cassette blocks (mode "none") that each make the same call `--block` (100) times.
  Identical requests are keyed by occurrence, so setup records the call `--block` times (mode
  "all"); each replay is one LMDB lookup of its own occurrence. This is the primary row: one
  recorded exchange per call, replayed, with the block's enter/exit amortised;
* pyrula, one cassette block per call replaying a single recording (adds the cassette's
  enter/exit per call: a prefix probe of the store and raising/lowering the network guard);
* vcrpy `use_cassette(record_mode="none", allow_playback_repeats=True)` replaying one interaction
  recorded in this run (vcrpy patches `httpx.MockTransport.handle_request`), with its default
  matching (method + URL) and matching on the body too (pyrula always compares the body).

Each round makes `--calls` (1,000) calls per variant, in slices of `--block` calls interleaved
across the variants; the vcrpy cassette is entered once per slice, like a pyrula block.

A second set of rounds does the same for other journaled surfaces, each against its own floor
(the same call over the bare MockTransport) measured interleaved in the same rounds, in blocks as
the primary row: `responses.create` (a ~1 kB Response) and the parse helper
`chat.completions.parse(response_format=<pydantic model>)`, whose replay also runs the SDK's
parser and the model's validation. `--only-chat` skips it.

A third table replays the same chat completion with no SDK at all: a raw `httpx.Client` posting
the request bytes and reading the reply's, over a bare MockTransport (its floor) and over
`pyrula.HttpxTransport` in blocks as above. This is the transport's own cost, which the SDK's
hides: what a proxy, or a test suite replaying thousands of calls, pays. `--only-chat` skips it.

`--callgrind` also counts instructions per call under valgrind (one child process, after the same
set-up and warm-up; see `_common.callgrind_segments`): the raw floor, raw pyrula, the SDK floor and
SDK pyrula, each over `--block` calls, each ratio against its floor from the same child. Load on
the machine does not change these counts. Those replays repeat requests and records the process
has seen (as a suite replaying its cassettes does), so pyrula's caches of canonical forms and
decoded records hit; a last pair replays `--block` distinct requests, each record read for the
first time in the process, against the raw floor sending the same distinct requests: the cost
with every cache missing (each request found by the store's sent index, its digest as sent,
without canonicalising it: docs/record-format.md#the-sent-index). The last row replays as many
other distinct requests from a text cassette whose cache was just built from its file, as in a
fresh clone or on CI (the file carries each record's sent digest).

Run: python benchmarks/bench_replay.py [--rounds 5] [--calls 1000] [--block 100] [--profile]
     [--callgrind]
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pydantic
import vcr
from _common import (
    API_KEY,
    BASE_URL,
    CALLGRIND_CHILD,
    MODEL,
    Samples,
    callgrind_segments,
    cg_mark,
    completion_json,
    console,
    fmt_time,
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
from rich.table import Table

import pyrula
from pyrula.journal import cassette_file

TARGET = 1.15
MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Ping? Answer in one short paragraph."},
]
REPLY = text_of(300, "Pong.")
BODY = completion_json(REPLY)
VCR_DEFAULT_MATCH = ("method", "scheme", "host", "port", "path", "query")
VCR_BODY_MATCH = (*VCR_DEFAULT_MATCH, "body")


class Answer(pydantic.BaseModel):
    answer: str


PARSED_BODY = completion_json(Answer(answer=REPLY).model_dump_json())

# The raw rows: the request bytes the SDK would send, posted by a plain `httpx.Client`.
RAW_URL = BASE_URL + "/chat/completions"
RAW_REQUEST = json.dumps({"messages": MESSAGES, "model": MODEL}).encode()
RAW_HEADERS = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}


def raw_call(client: httpx.Client, request: bytes = RAW_REQUEST) -> bytes:
    return client.post(RAW_URL, content=request, headers=RAW_HEADERS).content


def cold_requests(count: int, word: str = "Ping") -> list[bytes]:
    """`count` distinct raw requests: replayed once each, they hit no cache of pyrula's."""
    return [
        json.dumps(
            {"messages": [*MESSAGES, {"role": "user", "content": f"{word} {i}?"}], "model": MODEL}
        ).encode()
        for i in range(count)
    ]


# The text cassettes of the cold text rows, by the word of their distinct requests (new to the
# child as well): one as a file from before records kept their sent digest, one as recorded now
# (in this order: a later segment of the child tends to count more, so the order is against it).
TEXT_CASSETTES = {"Pung": "raw-cold-text-undigested", "Pong": "raw-cold-text"}


def text_cassette(store_path: str, name: str) -> tuple[Path, Path]:
    """A text cassette the cold text rows replay (its file), and the cache a fresh clone builds
    from the files (a folder no one has opened yet)."""
    base = Path(store_path).parent
    return base / "cassettes" / f"{name}.json", base / "clone-cache"


def record_text_cassettes(store_path: str, client: httpx.Client, block: int) -> None:
    for word, name in TEXT_CASSETTES.items():
        file, _ = text_cassette(store_path, name)
        with pyrula.cassette(name, mode="all", store=file.parent / "cache", path=file):
            for request in cold_requests(block, word):
                assert raw_call(client, request) == BODY
    file, _ = text_cassette(store_path, TEXT_CASSETTES["Pung"])
    document = json.loads(file.read_text())
    for entry in document["exchanges"]:
        del entry["extra"]["sent"]
    file.write_text(cassette_file.dumps(document))
    for name in TEXT_CASSETTES.values():  # checked out before the suite began, as in a clone
        file, _ = text_cassette(store_path, name)
        then = file.stat().st_mtime_ns - 3600 * 1_000_000_000
        os.utime(file, ns=(then, then))


def response_json(content: str) -> bytes:
    """A realistic non-streamed Responses API body."""
    return json.dumps(
        {
            "id": "resp_bench",
            "object": "response",
            "created_at": 1_750_000_000,
            "model": MODEL,
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": content, "annotations": []}],
                }
            ],
            "usage": {
                "input_tokens": 12,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 48,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 60,
            },
        }
    ).encode()


RESPONSE_BODY = response_json(REPLY)


def reply_for(request: httpx.Request) -> bytes:
    """The stand-in provider's body for each surface the benchmark calls."""
    if request.url.path.endswith("/responses"):
        return RESPONSE_BODY
    return PARSED_BODY if b'"response_format"' in request.content else BODY


# Each surface's call, returning the text the caller reads (checked against REPLY).
SURFACES: dict[str, Callable[[Any], str]] = {
    "responses.create": lambda client: (
        client.responses.create(
            model=MODEL, input=MESSAGES[1]["content"], instructions=MESSAGES[0]["content"]
        ).output_text
    ),
    "chat.completions.parse": lambda client: (
        client.chat.completions.parse(model=MODEL, messages=MESSAGES, response_format=Answer)
        .choices[0]
        .message.parsed.answer
    ),
}


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--calls", type=int, default=1000, help="calls per variant per round")
    args.add_argument("--block", type=int, default=100, help="calls per cassette block (slice)")
    args.add_argument("--profile", action="store_true", help="cProfile pyrula's replay path")
    args.add_argument("--only-chat", action="store_true", help="skip the other surfaces")
    args.add_argument("--callgrind", action="store_true", help="count instructions (valgrind)")
    opts = args.parse_args()
    n: int = opts.calls
    block: int = opts.block
    slices = max(1, n // block)
    header("bench_replay: replay one recorded chat completion", opts.rounds, calls=n, block=block)

    upstream_calls = 0

    def provider(request: httpx.Request) -> httpx.Response:
        nonlocal upstream_calls
        upstream_calls += 1
        return json_response(reply_for(request))

    floor_client = openai_client(httpx.MockTransport(provider))
    pyrula_client = openai_client(pyrula.HttpxTransport(httpx.MockTransport(provider)))
    raw_floor = httpx.Client(transport=httpx.MockTransport(provider))
    raw_pyrula = httpx.Client(transport=pyrula.HttpxTransport(httpx.MockTransport(provider)))

    tmp = scratch_dir("replay", keep=opts.keep)
    store_path = tmp / "store"
    cassette_path = str(tmp / "vcr.yaml")

    # Setup records through the real recorders; fsync is off only to make setup quick.
    with pyrula.Store(store_path, sync=False) as setup_store:
        with pyrula.cassette("repeat", mode="all", store=setup_store):
            for _ in range(block):
                assert call(pyrula_client) == REPLY
        with pyrula.cassette("single", mode="all", store=setup_store):
            assert call(pyrula_client) == REPLY
        with pyrula.cassette("raw", mode="all", store=setup_store):
            for _ in range(block):
                assert raw_call(raw_pyrula) == BODY
        with pyrula.cassette("raw-cold", mode="all", store=setup_store):
            for request in cold_requests(block):
                assert raw_call(raw_pyrula, request) == BODY
        record_text_cassettes(str(store_path), raw_pyrula, block)
        for surface, ask in SURFACES.items():
            with pyrula.cassette(surface, mode="all", store=setup_store):
                for _ in range(block):
                    assert ask(pyrula_client) == REPLY
    with vcr.use_cassette(cassette_path, record_mode="all", filter_headers=["authorization"]):
        assert call(floor_client) == REPLY
    store = pyrula.Store(store_path)  # the default store, as a user opens it
    entries = store.stat()["entries"]
    console.print(f"setup: {upstream_calls} calls recorded; store entries {entries}")

    def floor() -> int:
        for _ in range(block):
            call(floor_client)
        return block

    def pyrula_block() -> int:
        with pyrula.cassette("repeat", mode="none", store=store) as cas:
            for _ in range(block):
                call(pyrula_client)
        assert cas.stats.replayed == block
        return block

    def pyrula_call_blocks() -> int:
        for _ in range(block):
            with pyrula.cassette("single", mode="none", store=store):
                call(pyrula_client)
        return block

    def vcr_replay(match_on: tuple[str, ...]) -> Callable[[], int]:
        def run() -> int:
            with vcr.use_cassette(
                cassette_path, record_mode="none", allow_playback_repeats=True, match_on=match_on
            ):
                for _ in range(block):
                    assert call(floor_client) == REPLY
            return block

        return run

    floor_name = "floor: bare MockTransport"
    main_name = f"pyrula: blocks of {block} calls"
    vcr_name = "vcrpy: repeats, method+URL"
    variants = {
        floor_name: floor,
        main_name: pyrula_block,
        "pyrula: 1 block per call": pyrula_call_blocks,
        vcr_name: vcr_replay(VCR_DEFAULT_MATCH),
        "vcrpy: repeats, + body": vcr_replay(VCR_BODY_MATCH),
    }
    for fn in variants.values():  # warm imports, caches and the store's pages
        fn()
    before = upstream_calls
    results = run_rounds(variants, opts.rounds, slices=slices, label="replay")
    floor_upstream = (opts.rounds * slices) * block
    replay_leaks = upstream_calls - before - floor_upstream

    console.print(
        rate_table(
            f"{n:,} replays of one chat completion per round (sync openai SDK)", results, floor_name
        )
    )
    base, row, vrow = results[floor_name], results[main_name], results[vcr_name]
    cpu_ratio = row.cpu_median / base.cpu_median
    console.print(
        f"pyrula/floor = {row.wall_median / base.wall_median:.3f} wall, {cpu_ratio:.3f} CPU, "
        f"{row.cpu_best / base.cpu_best:.3f} best; "
        f"vcr/floor = {vrow.wall_median / base.wall_median:.3f} wall, "
        f"{vrow.cpu_median / base.cpu_median:.3f} CPU, {vrow.cpu_best / base.cpu_best:.3f} best"
    )
    console.print(
        f"pyrula adds {(row.cpu_median - base.cpu_median) * 1e6:.0f} µs CPU per replayed call "
        f"(median; best slices: {(row.cpu_best - base.cpu_best) * 1e6:.0f} µs)"
    )
    verdict = "MET" if cpu_ratio <= TARGET else "MISSED"
    console.print(f"target pyrula ≤ {TARGET}x floor (median CPU): [bold]{verdict}[/bold]")
    console.print(f"upstream calls made by the replaying variants (must be 0): {replay_leaks}")

    if not opts.only_chat:
        extra = surface_variants(store, floor_client, pyrula_client, block)
        before = upstream_calls
        surface_results = run_rounds(extra, opts.rounds, slices=slices, label="surfaces")
        leaks = upstream_calls - before - opts.rounds * slices * block * len(SURFACES)
        chat = {"chat.completions.create": (results[floor_name], results[main_name])}
        console.print(surface_table(n, chat | pairs(surface_results), block))
        console.print(f"upstream calls made by the replaying variants (must be 0): {leaks}")

    if not opts.only_chat:
        raw = raw_variants(store, raw_floor, raw_pyrula, block)
        before = upstream_calls
        raw_results = run_rounds(raw, opts.rounds, slices=slices, label="raw")
        leaks = upstream_calls - before - opts.rounds * slices * block
        console.print(
            rate_table(
                f"{n:,} replays per round with no SDK: a raw httpx.Client, blocks of {block}",
                raw_results,
                RAW_FLOOR,
            )
        )
        console.print(f"upstream calls made by the replaying variants (must be 0): {leaks}")

    if opts.callgrind:
        store.close()
        keep = tmp / "callgrind" if opts.keep else None
        counts = callgrind_segments(__file__, str(store_path), str(block), keep=keep)
        if keep is not None:
            console.print(f"callgrind dumps kept in {keep} (segment k: cg.out.<k + 1>)")
        per_op = {name: count / block for name, count in zip(CG_VARIANTS, counts, strict=True)}
        raw_rows = {k: v for k, v in per_op.items() if k.startswith("raw")}
        sdk_rows = {k: v for k, v in per_op.items() if k.startswith("SDK")}
        cold_rows = {k: v for k, v in per_op.items() if k.startswith("cold")}
        title = f"instructions per replayed call (callgrind, {block} calls after warm-up)"
        console.print(instructions_table(title + ", raw httpx.Client", raw_rows, CG_VARIANTS[0]))
        console.print(instructions_table(title + ", openai SDK", sdk_rows, CG_VARIANTS[2]))
        console.print(
            instructions_table(
                f"instructions per replayed call, {block} distinct requests each replayed once "
                "(no cache hit: canonical forms and records are new to the process)",
                cold_rows,
                CG_VARIANTS[4],
            )
        )
        store = pyrula.Store(store_path)

    if opts.profile:
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(slices):
            pyrula_block()
        profile.disable()
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("cumulative").print_stats(r"pyrula/|fingerprints/", 30)
        print(out.getvalue())

    store.close()


def call(client: Any) -> str:
    reply = client.chat.completions.create(model=MODEL, messages=MESSAGES)
    return str(reply.choices[0].message.content)


RAW_FLOOR = "raw floor: bare MockTransport"


def raw_variants(
    store: Any, raw_floor: httpx.Client, raw_pyrula: httpx.Client, block: int
) -> dict[str, Callable[[], int]]:
    """A raw `httpx.Client` over the bare MockTransport, and over pyrula replaying a block."""

    def floor() -> int:
        for _ in range(block):
            raw_call(raw_floor)
        return block

    def replay() -> int:
        with pyrula.cassette("raw", mode="none", store=store) as cas:
            for _ in range(block):
                raw_call(raw_pyrula)
        assert cas.stats.replayed == block
        return block

    variants = {RAW_FLOOR: floor, f"raw pyrula: blocks of {block} calls": replay}
    for fn in variants.values():  # warm
        fn()
    return variants


CG_VARIANTS = (
    "raw floor: httpx.Client over MockTransport",
    "raw pyrula: HttpxTransport replay",
    "SDK floor: chat.completions.create over MockTransport",
    "SDK pyrula: chat.completions.create replay",
    "cold raw floor: distinct requests, bare MockTransport",
    "cold raw pyrula: distinct requests, each record's first replay in the process",
    "cold raw pyrula: distinct requests from a text cassette without sent digests (as before)",
    "cold raw pyrula: the same from a text cassette as recorded now, its cache built from it",
)


def callgrind_child(store_path: str, block: int) -> None:
    """Under callgrind: warm each variant, then measure `block` calls of each between marks."""

    def provider(request: httpx.Request) -> httpx.Response:
        return json_response(reply_for(request))

    store = pyrula.Store(store_path)
    raw_floor = httpx.Client(transport=httpx.MockTransport(provider))
    raw_pyrula = httpx.Client(transport=pyrula.HttpxTransport(httpx.MockTransport(provider)))
    floor_client = openai_client(httpx.MockTransport(provider))
    pyrula_client = openai_client(pyrula.HttpxTransport(httpx.MockTransport(provider)))

    def sdk_floor() -> int:
        for _ in range(block):
            call(floor_client)
        return block

    def sdk_replay() -> int:
        with pyrula.cassette("repeat", mode="none", store=store) as cas:
            for _ in range(block):
                call(pyrula_client)
        assert cas.stats.replayed == block
        return block

    def cold_floor() -> int:
        for request in cold_requests(block):
            raw_call(raw_floor, request)
        return block

    def cold_replay() -> int:
        with pyrula.cassette("raw-cold", mode="none", store=store) as cas:
            for request in cold_requests(block):
                raw_call(raw_pyrula, request)
        assert cas.stats.replayed == block
        return block

    # A fresh clone's text cassette: the file is there, its cache is built at the first open
    # (before the marks, as a suite's first test pays it once); then each request replays once.
    clone = pyrula.Store(text_cassette(store_path, "")[1])
    cold_text = []
    for word, name in TEXT_CASSETTES.items():
        file, _ = text_cassette(store_path, name)
        with pyrula.cassette(name, mode="none", store=clone, path=file):
            pass

        def replay(word: str = word, name: str = name, file: Path = file) -> int:
            with pyrula.cassette(name, mode="none", store=clone, path=file) as cas:
                for request in cold_requests(block, word):
                    raw_call(raw_pyrula, request)
            assert cas.stats.replayed == block
            assert cas.stats.sent_hits == (block if word == "Pong" else 0)
            return block

        cold_text.append(replay)

    raw = list(raw_variants(store, raw_floor, raw_pyrula, block).values())
    segments = [*raw, sdk_floor, sdk_replay]
    for fn in segments:  # warm twice: caches, the store's pages, the SDK's lazy imports
        fn()
    cg_mark()
    # The cold ones run once: first reads.
    for fn in [*segments, cold_floor, cold_replay, *cold_text]:
        fn()
        cg_mark()
    clone.close()
    store.close()


def surface_variants(
    store: Any, floor_client: Any, pyrula_client: Any, block: int
) -> dict[str, Callable[[], int]]:
    """For each extra surface: its floor, and pyrula replaying its recorded block."""
    variants: dict[str, Callable[[], int]] = {}
    for surface, ask in SURFACES.items():

        def floor(ask: Callable[[Any], str] = ask) -> int:
            for _ in range(block):
                ask(floor_client)
            return block

        def replay(surface: str = surface, ask: Callable[[Any], str] = ask) -> int:
            with pyrula.cassette(surface, mode="none", store=store) as cas:
                for _ in range(block):
                    ask(pyrula_client)
            assert cas.stats.replayed == block
            return block

        variants[f"{surface}: floor"] = floor
        variants[f"{surface}: pyrula"] = replay
    for fn in variants.values():  # warm, as for the chat rows
        fn()
    return variants


def pairs(results: dict[str, Samples]) -> dict[str, tuple[Samples, Samples]]:
    return {s: (results[f"{s}: floor"], results[f"{s}: pyrula"]) for s in SURFACES}


def surface_table(n: int, rows: dict[str, tuple[Samples, Samples]], block: int) -> Table:
    table = Table(
        title=f"{n:,} replays per surface per round, blocks of {block}, each vs its own floor "
        "(the same call over a bare MockTransport, same rounds)",
        title_justify="left",
    )
    for column in ("surface", "floor/op CPU", "pyrula/op CPU", "x floor wall", "x floor CPU"):
        table.add_column(column, justify="left" if column == "surface" else "right")
    table.add_column("x floor best", justify="right")
    table.add_column("added/op CPU", justify="right")
    for surface, (base, row) in rows.items():
        table.add_row(
            surface,
            fmt_time(base.cpu_median),
            fmt_time(row.cpu_median),
            f"{row.wall_median / base.wall_median:.3f}",
            f"[bold]{row.cpu_median / base.cpu_median:.3f}[/bold]",
            f"{row.cpu_best / base.cpu_best:.3f}",
            fmt_time(row.cpu_median - base.cpu_median),
        )
    return table


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == CALLGRIND_CHILD:
        callgrind_child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
