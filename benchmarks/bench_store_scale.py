"""Store scale: does replaying get slower as the store fills, and what does opening one cost?

Setup writes 1,000 and 100,000 distinct recorded chat completions into two stores, through the
public `Exchanges.put` under their real cassette keys (the request is fingerprinted exactly as a
recording does), batching 10,000 puts per write transaction with fsync off, for setup speed only.
The measured stores are then reopened as a user opens them (`Store(path)`, defaults).

1. The extra time to replay the LAST recorded exchange against the FIRST, in the 1,000 and the
   100,000 store: through the openai SDK (one cassette block, mode "none", per call) and at the
   store level (`Exchanges.get` + reading the frames), baseline = first of 1,000.
2. Opening a store of 1,000 exchanges (`Store(path)`) and then replaying its last exchange,
   against vcrpy loading a 1,000-interaction cassette (recorded by vcrpy in this run) and replaying
   its last interaction (vcrpy matching on the body too, as pyrula does, so the right one is found).
   The same 1,000 exchanges as a text cassette file (`pyrula.cassette(..., path=)`): its first
   use (a new cache: the file is parsed and the cache built) and a later open (the cache is
   current: the file's digest is checked), with and without replaying its last exchange.

Run: python benchmarks/bench_store_scale.py [--rounds 5] [--large 100000]
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import vcr
from _common import (
    API_KEY,
    BASE_URL,
    MODEL,
    completion_json,
    console,
    fmt_time,
    header,
    json_response,
    lmdb_sizes,
    openai_client,
    parser,
    rate_table,
    run_rounds,
    scratch_dir,
)
from pyrula.fingerprints import RequestParts, canonicalize
from rich.table import Table

import pyrula
from pyrula.journal import Exchange, Exchanges, cassette_file
from pyrula.journal.exchanges import PreparedExchange
from pyrula.journal.keys import cassette_key
from pyrula.journal.lmdb_store import LmdbStore
from pyrula.journal.recorder import request_document
from pyrula.journal.store import Txn

NAMESPACE = "scale"
URL = BASE_URL + "/chat/completions"
REQUEST_HEADERS = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}
BATCH = 10_000
VCR_BODY_MATCH = ("method", "scheme", "host", "port", "path", "query", "body")


def messages(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are a careful arithmetic tutor."},
        {"role": "user", "content": f"Question {i}: what is {i} squared? Show one line of work."},
    ]


def answer(i: int) -> str:
    return f"{i} squared is {i} x {i} = {i * i}."


def fill(path: Path, n: int) -> float:
    """Write `n` recorded exchanges under their cassette keys, `BATCH` to a commit
    (`Exchanges.prepare` each, `Exchanges.apply` them in one write); seconds taken."""
    started = time.perf_counter()
    store = LmdbStore(path, sync=False, map_size=1 << 30)  # flushed once, at the end
    exchanges = Exchanges(store)
    headers = [("content-type", "application/json"), ("x-request-id", "req_bench")]
    for start in range(0, n, BATCH):
        batch = []
        for i in range(start, min(n, start + BATCH)):
            body = json.dumps({"messages": messages(i), "model": MODEL}).encode()
            parts = RequestParts("POST", URL, REQUEST_HEADERS, body)
            canonical = canonicalize(parts)
            key = cassette_key(NAMESPACE, canonical.digest, 0)
            reply = completion_json(answer(i), completion_id=f"chatcmpl-{i}")
            exchange = Exchange(
                request_doc=request_document(parts, canonical),
                surface=canonical.surface,
                fingerprint=canonical.digest,
                method="POST",
                url=URL,
                status=200,
                headers=headers,
                frames=[reply],
                streamed=False,
                elapsed_ms=12.5,
                namespace=NAMESPACE,
            )
            batch.append(exchanges.prepare(key, exchange))

        def write(txn: Txn, batch: list[PreparedExchange] = batch) -> None:
            for prepared in batch:
                exchanges.apply(txn, prepared)

        store.write(write)
    store.env.sync(True)
    store.close()
    return time.perf_counter() - started


def key_of(i: int) -> bytes:
    body = json.dumps({"messages": messages(i), "model": MODEL}).encode()
    canonical = canonicalize(RequestParts("POST", URL, REQUEST_HEADERS, body))
    return cassette_key(NAMESPACE, canonical.digest, 0)


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--small", type=int, default=1000)
    args.add_argument("--large", type=int, default=100_000)
    args.add_argument("--calls", type=int, default=100, help="SDK replays per slice")
    opts = args.parse_args()
    small: int = opts.small
    large: int = opts.large
    calls: int = opts.calls
    header(
        "bench_store_scale: replay cost vs store size; opening a store",
        opts.rounds,
        small=small,
        large=large,
    )

    tmp = scratch_dir("scale", keep=opts.keep)
    paths = {small: tmp / "small", large: tmp / "large"}
    for n, path in paths.items():
        seconds = fill(path, n)
        written = LmdbStore(path)
        sizes = lmdb_sizes(written)
        written.close()
        console.print(
            f"setup: {n:,} exchanges written in {seconds:.1f} s; data.mdb {sizes['file'] / 1e6:.1f}"
            f" MB, LMDB live pages {sizes['live'] / 1e6:.1f} MB "
            f"({sizes['live'] / n:,.0f} bytes per exchange)"
        )

    upstream_calls = 0

    def provider(request: httpx.Request) -> httpx.Response:
        nonlocal upstream_calls
        upstream_calls += 1
        i = int(json.loads(request.content)["messages"][1]["content"].split()[1].rstrip(":"))
        return json_response(completion_json(answer(i), completion_id=f"chatcmpl-{i}"))

    floor_client = openai_client(httpx.MockTransport(provider))
    pyrula_client = openai_client(pyrula.HttpxTransport(httpx.MockTransport(provider)))

    def call(client: Any, i: int) -> str:
        reply = client.chat.completions.create(model=MODEL, messages=messages(i))
        return str(reply.choices[0].message.content)

    # vcrpy records its own 1,000-interaction cassette in this run.
    cassette_path = str(tmp / "vcr-1000.yaml")
    started = time.perf_counter()
    with vcr.use_cassette(cassette_path, record_mode="all", filter_headers=["authorization"]):
        for i in range(small):
            call(floor_client, i)
    vcr_bytes = Path(cassette_path).stat().st_size
    console.print(
        f"setup: vcrpy recorded {small:,} interactions in {time.perf_counter() - started:.1f} s, "
        f"{vcr_bytes / 1e6:.1f} MB of YAML"
    )
    recorded = upstream_calls

    # -- 1. first vs last ------------------------------------------------------------------------
    stores = {n: pyrula.Store(path) for n, path in paths.items()}
    cases = {
        f"{small:,} store, first": (small, 0),
        f"{small:,} store, last": (small, small - 1),
        f"{large:,} store, first": (large, 0),
        f"{large:,} store, last": (large, large - 1),
    }

    def sdk_replay(n: int, i: int) -> Callable[[], int]:
        store, expected = stores[n], answer(i)

        def run() -> int:
            for _ in range(calls):
                with pyrula.cassette(NAMESPACE, mode="none", store=store):
                    assert call(pyrula_client, i) == expected
            return calls

        return run

    def store_get(n: int, i: int) -> Callable[[], int]:
        exchanges, key, reps = Exchanges(stores[n]), key_of(i), 5000

        def run() -> int:
            for _ in range(reps):
                found = exchanges.get(key)
                assert found is not None
                b"".join(exchanges.frames(*found))
            return reps

        return run

    sdk_variants = {name: sdk_replay(n, i) for name, (n, i) in cases.items()}
    get_variants = {name: store_get(n, i) for name, (n, i) in cases.items()}
    for fn in (*sdk_variants.values(), *get_variants.values()):
        fn()
    sdk = run_rounds(sdk_variants, opts.rounds, slices=2, label="SDK replays")
    gets = run_rounds(get_variants, opts.rounds, slices=2, label="store reads")
    baseline = next(iter(cases))
    console.print(rate_table("Replay through the SDK (one cassette block per call)", sdk, baseline))
    console.print(rate_table("Store level: Exchanges.get + frames", gets, baseline, unit="get"))

    extra = Table(
        title="Extra time for the LAST exchange vs the FIRST (medians)", title_justify="left"
    )
    for column in ("store", "SDK wall", "SDK CPU", "get wall", "get CPU"):
        extra.add_column(column, justify="right")
    for n in (small, large):
        first, last = f"{n:,} store, first", f"{n:,} store, last"
        extra.add_row(
            f"{n:,}",
            _delta(sdk[last].wall_median - sdk[first].wall_median),
            _delta(sdk[last].cpu_median - sdk[first].cpu_median),
            _delta(gets[last].wall_median - gets[first].wall_median),
            _delta(gets[last].cpu_median - gets[first].cpu_median),
        )
    big_last, small_first = f"{large:,} store, last", baseline
    extra.add_row(
        f"{large:,} last vs {small:,} first",
        _delta(sdk[big_last].wall_median - sdk[small_first].wall_median),
        _delta(sdk[big_last].cpu_median - sdk[small_first].cpu_median),
        _delta(gets[big_last].wall_median - gets[small_first].wall_median),
        _delta(gets[big_last].cpu_median - gets[small_first].cpu_median),
    )
    console.print(extra)
    for store in stores.values():
        store.close()

    # -- 2. opening ------------------------------------------------------------------------------
    newest = small - 1
    expected = answer(newest)

    def pyrula_open() -> int:
        pyrula.Store(paths[small]).close()
        return 1

    def pyrula_open_replay() -> int:
        store = pyrula.Store(paths[small])
        with pyrula.cassette(NAMESPACE, mode="none", store=store):
            assert call(pyrula_client, newest) == expected
        store.close()
        return 1

    def vcr_load() -> int:
        with vcr.use_cassette(cassette_path, record_mode="none", match_on=VCR_BODY_MATCH):
            pass
        return 1

    def vcr_load_replay() -> int:
        with vcr.use_cassette(cassette_path, record_mode="none", match_on=VCR_BODY_MATCH):
            assert call(floor_client, newest) == expected
        return 1

    # The same exchanges as a text cassette in the repository, the store only its cache.
    text_file = tmp / "cassettes" / "test_scale" / "test_1000.json"
    with pyrula.Store(paths[small]) as source:
        cassette_file.save(source, NAMESPACE, text_file)
    console.print(
        f"setup: text cassette of {small:,} exchanges, "
        f"{text_file.stat().st_size / 1e6:.1f} MB of JSON"
    )
    cache = pyrula.Store(tmp / "text-cache")
    fresh = iter(range(1_000_000))

    def text_first_use() -> int:
        store = pyrula.Store(tmp / f"first-use-{next(fresh)}")
        with pyrula.cassette(NAMESPACE, mode="none", store=store, path=text_file):
            pass
        store.close()
        return 1

    def text_later() -> int:
        with pyrula.cassette(NAMESPACE, mode="none", store=cache, path=text_file):
            pass
        return 1

    def text_later_replay() -> int:
        with pyrula.cassette(NAMESPACE, mode="none", store=cache, path=text_file):
            assert call(pyrula_client, newest) == expected
        return 1

    open_variants = {
        "pyrula: Store(path)": pyrula_open,
        "pyrula: Store(path) + 1st replay": pyrula_open_replay,
        "pyrula text cassette: first use (builds the cache)": text_first_use,
        "pyrula text cassette: later (digest check)": text_later,
        "pyrula text cassette: later + 1st replay": text_later_replay,
        "vcrpy: load cassette": vcr_load,
        "vcrpy: load + 1st replay": vcr_load_replay,
    }
    for fn in open_variants.values():
        fn()
    opened = run_rounds(open_variants, opts.rounds, label="open")
    console.print(
        rate_table(
            f"Open a {small:,}-exchange store / cassette, then replay its last exchange",
            opened,
            "pyrula: Store(path) + 1st replay",
            unit="open",
        )
    )
    p = opened["pyrula: Store(path) + 1st replay"].wall_median
    v = opened["vcrpy: load + 1st replay"].wall_median
    console.print(
        f"open + first replay: pyrula {fmt_time(p)}, vcrpy {fmt_time(v)} "
        f"(vcrpy/pyrula = {v / p:.1f}x)"
    )
    t = opened["pyrula text cassette: later + 1st replay"].wall_median
    f = opened["pyrula text cassette: first use (builds the cache)"].wall_median
    console.print(
        f"text cassette: first use {fmt_time(f)} (vcrpy load/first use = "
        f"{opened['vcrpy: load cassette'].wall_median / f:.1f}x); later open + first "
        f"replay {fmt_time(t)} (vcrpy/pyrula = {v / t:.1f}x)"
    )
    cache.close()
    console.print(f"upstream calls made by replays (must be 0): {upstream_calls - recorded}")


def _delta(seconds: float) -> str:
    sign = "+" if seconds >= 0 else "-"
    return sign + fmt_time(abs(seconds))


if __name__ == "__main__":
    main()
