"""Retention at scale on PostgreSQL: how fast a purge deletes ended runs, and what claims made
meanwhile by another worker's sessions cost (docs/scaling.md, "Retention at scale").

The ended runs (`--runs`, each of `--events` events, interleaved as runs side by side write
them) and the queued runs that a claimer takes one by one during the purge are seeded in SQL on
a fresh schema of one throwaway PostgreSQL 16 (`pgserver`) or `--url`. Prints the purge's
runs/s and events/s, and the claims' median and slowest latency while it ran.

Run: python benchmarks/bench_purge.py [--runs 2000] [--events 10] [--queued 200] [--url URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg

from pyrula.journal.store import Store
from pyrula.runtime import RunStore
from pyrula.runtime.retention import purge

ROOT = Path(__file__).parents[1]
sys.path.insert(1, str(ROOT / "benchmarks"))

from bench_postgres import fresh_schema, server_url  # noqa: E402

RUN_ID = "'run_' || lpad(to_hex(r), 20, '0')"


def seed(url: str, runs: int, events: int, queued: int) -> None:
    """`runs` completed runs of `events` events each, then `queued` runs in the queue."""
    record = (
        "convert_to(json_build_object('id', {id}, 'name', 'work', 'input', r, 'status', {status}, "
        "'created_at', 1.7e9, 'updated_at', 1.7e9, 'attempt', 0, 'lease', NULL, 'result', NULL, "
        "'capture', 'io', 'options', '{{}}'::json)::text, 'UTF8')"
    )
    key = f"convert_to({RUN_ID}, 'UTF8')"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO pyrula_runs (k, v) SELECT {key}, "
            + record.format(id=RUN_ID, status="'completed'")
            + " FROM generate_series(1, %s) r",
            (runs,),
        )
        conn.execute(
            f"INSERT INTO pyrula_events (k, v) SELECT {key} || '\\x00'::bytea || "
            "int8send(s::bigint), convert_to(json_build_object('seq', s, 'type', 'step:done', "
            "'at', 1.7e9, 'payload', json_build_object('name', 'step' || s))::text, 'UTF8') "
            "FROM generate_series(1, %s) s, generate_series(1, %s) r",
            (events, runs),
        )
        for table, value in (
            ("pyrula_runs", record.format(id=RUN_ID, status="'queued'")),
            ("pyrula_queue", "convert_to('{\"input\": null}', 'UTF8')"),
        ):
            conn.execute(
                f"INSERT INTO {table} (k, v) SELECT {key}, {value} "
                "FROM generate_series(%s::int, %s::int) r",
                (runs + 1, runs + queued),
            )
        conn.execute("ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--queued", type=int, default=200)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    url = fresh_schema(server_url(args.url))
    Store(url).close()
    seed(url, args.runs, args.events, args.queued)
    purger, claimer = Store(url), Store(url)
    latencies: list[float] = []
    purging = threading.Event()

    def claim_while_purging() -> None:
        runs = RunStore(claimer)
        while purging.is_set() and len(latencies) < args.queued:
            started = time.perf_counter()
            runs.claim("claimer", ttl=600)
            latencies.append(time.perf_counter() - started)

    try:
        purging.set()
        thread = threading.Thread(target=claim_while_purging)
        thread.start()
        started = time.perf_counter()
        done = purge(RunStore(purger), 0, now=1.8e9)
        elapsed = time.perf_counter() - started
        purging.clear()
        thread.join()
    finally:
        purger.close()
        claimer.close()
    gone = len(done.runs)
    print(
        f"purge: {gone} runs of {args.events} events in {elapsed:.2f} s: {gone / elapsed:.0f} "
        f"runs/s, {gone * args.events / elapsed:,.0f} events/s"
    )
    if latencies:
        print(
            f"claims meanwhile: {len(latencies)}, median {statistics.median(latencies) * 1e3:.1f} "
            f"ms, slowest {max(latencies) * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
