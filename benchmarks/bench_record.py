"""Recording throughput: 1,000 distinct chat completions recorded through the openai SDK.

Variants, each making the same 1,000 distinct calls per round (one cassette per round):

* floor: the SDK over a bare `httpx.MockTransport` (no recorder);
* pyrula: `HttpxTransport` over the same MockTransport, a fresh cassette in mode "once" on the
  default `Store` (fsync on every committed exchange: each call is on disk when it returns);
* pyrula with `Store(sync=False)`, to show what the per-exchange fsync costs;
* vcrpy: `use_cassette(<temp YAML>, record_mode="all")` (it patches
  `httpx.MockTransport.handle_request`), including writing the YAML when the block ends.

Run: python benchmarks/bench_record.py [--rounds 5] [--calls 1000]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import vcr
from _common import (
    MODEL,
    completion_json,
    console,
    header,
    json_response,
    openai_client,
    parser,
    rate_table,
    run_rounds,
    scratch_dir,
    text_of,
)

import pyrula

BODY = completion_json(text_of(300, "Recorded answer."))


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--calls", type=int, default=1000)
    opts = args.parse_args()
    n = opts.calls
    header("bench_record: record 1,000 chat completions", opts.rounds, calls=n)

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

    console.print(rate_table(f"Recording {n:,} distinct chat completions per round", results,
                             floor_name))
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


if __name__ == "__main__":
    main()
