"""What a recorded exchange's commit writes, table by table, and what each part costs.

A live loopback provider (bench_record.py's server, in its own process) answers raw
`httpx.Client` posts; each variant records CALLS distinct exchanges per round into a default
`Store` (fsync per commit), in a fresh cassette, interleaved round by round:

* "as recorded": as pyrula records (the exchange's record, its request's blobs and its
  sent-index entry, in the exchange's commit);
* "no sent-index entry" (`sent_index.entry` gives none), "no request blobs" (the prepared
  exchange carries none), "record only": without those parts.

For each it prints the write requests the disk took per exchange (counted at the device, which
covers the whole machine: run it with nothing else writing; the meta page is one) and the wall time
per recorded call, beside the live call with no recorder. The variants that leave a part out are for
measurement only: a store recorded so is incomplete (a record whose request cannot be read back), so
each has a store of its own, removed at exit.

A second table does the same for a run's model calls: one agent run making CALLS chat
completions through the openai SDK over Pyrula's transport (an in-process `httpx2.MockTransport`
answers), worked by a `Worker` on a fresh default store per round: "as recorded" (a run's call
writes no sent-index entry: only a cassette's replays read the index) against "with a sent-index
entry" (as before that change: the entry in each call's commit).

    python benchmarks/bench_commit_pages.py [--rounds 5] [--calls 300]
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import httpx
import httpx2
import openai
from _common import (
    API_KEY,
    MODEL,
    completion_json,
    console,
    device_writes,
    header,
    parser,
    scratch_dir,
)
from bench_record import start_server
from pyrula.fingerprints import Canonical
from rich.table import Table

import pyrula
from pyrula.agents import AgentContext, agent
from pyrula.journal import recorder, sent_index
from pyrula.journal.exchanges import Exchange, Exchanges, PreparedExchange
from pyrula.journal.store import Store
from pyrula.runtime import Worker, session, submit

VARIANTS = ("as recorded", "no sent-index entry", "no request blobs", "record only")
RUN_VARIANTS = ("a run's calls, as recorded", "a run's calls, with a sent-index entry")


_PREPARE = Exchanges.prepare  # the library's own, which "no request blobs" wraps


def _no_entry(sent: bytes | None, canonical: Canonical) -> tuple[bytes, bytes] | None:
    """`sent_index.entry` giving none: the commit writes no sent-index entry."""
    return None


def _without_blobs(
    exchanges: Exchanges, key: bytes, exchange: Exchange, *, sent: tuple[bytes, bytes] | None = None
) -> PreparedExchange:
    """`Exchanges.prepare`, its request's blobs left out of what the commit writes."""
    return _PREPARE(exchanges, key, exchange, sent=sent)._replace(blobs=[])


@contextlib.contextmanager
def leaving_out(variant: str) -> Iterator[None]:
    """Record as `variant` says (the journal's functions swapped for the block): the recorder's
    `sent_index.entry` (the entry it hands the commit), `Exchanges.prepare` (whose blobs the
    commit writes) and the run session's `record_exchange`."""
    with contextlib.ExitStack() as swapped:
        if variant in ("no sent-index entry", "record only"):
            swapped.enter_context(mock.patch.object(sent_index, "entry", _no_entry))
        if variant in ("no request blobs", "record only"):
            swapped.enter_context(mock.patch.object(Exchanges, "prepare", _without_blobs))
        if variant == RUN_VARIANTS[1]:
            indexed = functools.partial(recorder.record_exchange, index_sent=True)
            swapped.enter_context(mock.patch.object(session, "record_exchange", indexed))
        yield


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--calls", type=int, default=300)
    opts = args.parse_args()
    n = opts.calls
    header("bench_commit_pages: what one recorded exchange's commit writes", opts.rounds, calls=n)
    tmp = scratch_dir("pages", keep=opts.keep)
    server, base_url = start_server()
    try:
        measure(n, opts.rounds, tmp, base_url + "/chat/completions")
    finally:
        server.kill()
        server.wait()
    measure_runs(n, opts.rounds, tmp)


def measure(n: int, rounds: int, tmp: Path, url: str) -> None:
    headers = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}
    question = itertools.count()

    def post(client: httpx.Client) -> None:
        content = f"Question {next(question)}: summarise the attached quarterly figures."
        body = json.dumps({"messages": [{"role": "user", "content": content}], "model": MODEL})
        client.post(url, content=body.encode(), headers=headers).read()

    floor = httpx.Client(transport=httpx.HTTPTransport())
    client = httpx.Client(transport=pyrula.HttpxTransport(httpx.HTTPTransport()))
    stores = {v: pyrula.Store(tmp / f"store-{i}") for i, v in enumerate(VARIANTS)}
    cassettes = itertools.count()

    def recording(variant: str) -> Callable[[], tuple[float, float]]:
        def block() -> None:
            with pyrula.cassette(f"c-{next(cassettes)}", mode="once", store=stores[variant]):
                for _ in range(n):
                    post(client)

        def run() -> tuple[float, float]:
            with leaving_out(variant):
                return per_call(block, n, tmp)

        return run

    def live() -> tuple[float, float]:
        start = time.perf_counter()
        for _ in range(n):
            post(floor)
        return (time.perf_counter() - start) / n, 0.0

    runs: dict[str, Callable[[], tuple[float, float]]] = {"live call, no recorder": live}
    runs.update({v: recording(v) for v in VARIANTS})
    samples = interleaved(runs, rounds)  # its warm-up also takes each store past its first pages
    names = list(samples)

    title = f"{n} raw calls recorded per round, default Store (fsync), median of {rounds}"
    print_table(title, samples, floor=names[0], main="as recorded")
    for store in stores.values():
        store.close()


def measure_runs(n: int, rounds: int, tmp: Path) -> None:
    """Per model call of a run: the disk's write requests and wall, for `RUN_VARIANTS`."""

    def reply(request: httpx2.Request) -> httpx2.Response:
        question = json.loads(request.content)["messages"][-1]["content"]
        return httpx2.Response(200, content=completion_json(f"answer to {question}"))

    client = openai.AsyncOpenAI(
        api_key=API_KEY,
        base_url="http://openai.test/v1",
        http_client=httpx2.AsyncClient(
            transport=pyrula.AsyncHttpx2Transport(httpx2.MockTransport(reply))
        ),
        max_retries=0,
    )
    question = itertools.count()

    @agent(name="bench_commit_pages.calls")
    async def calls(ctx: AgentContext, count: int) -> int:
        for _ in range(count):
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"Question {next(question)}"}]
            )
        return count

    def run_of(variant: str) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            store = Store(Path(tempfile.mkdtemp(dir=tmp)) / "store")

            def block() -> None:
                handle = submit(calls, n, store=store)
                asyncio.run(Worker(store, poll_seconds=0.005).run(until_idle=True))
                assert handle.record.status == "completed", handle.record

            with leaving_out(variant):
                figures = per_call(block, n, tmp)
            store.close()
            return figures

        return run

    runs = {variant: run_of(variant) for variant in RUN_VARIANTS}
    samples = interleaved(runs, rounds)
    title = f"a run of {n} model calls per round, fresh default Store, median of {rounds}"
    print_table(title, samples, floor=None, main=RUN_VARIANTS[0])


def per_call(block: Callable[[], None], n: int, folder: Path) -> tuple[float, float]:
    """(wall seconds, write requests of the disk under `folder`) per call of `block`, which
    makes `n` calls."""
    start = time.perf_counter()
    _, writes = device_writes(block, folder)
    wall = time.perf_counter() - start
    return wall / n, float("nan") if writes is None else writes.requests / n


def interleaved(
    runs: dict[str, Callable[[], tuple[float, float]]], rounds: int
) -> dict[str, list[tuple[float, float]]]:
    """Each of `runs` once to warm up, then once a round, the order rotating."""
    for run in runs.values():
        run()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            samples[name].append(runs[name]())
        console.print(f"  [dim]round {r + 1}/{rounds} done[/dim]")
    return samples


def print_table(
    title: str, samples: dict[str, list[tuple[float, float]]], *, floor: str | None, main: str
) -> None:
    """Medians of write requests per call and wall per call; `x live` against `floor`, if any."""
    main_wall = statistics.median(s[0] for s in samples[main])
    floor_wall = statistics.median(s[0] for s in samples[floor]) if floor else None
    table = Table(title=title)
    for column in ("variant", "disk writes / call", "wall / call", "x live", f"vs {main}"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name, rows in samples.items():
        wall = statistics.median(s[0] for s in rows)
        writes = statistics.median(s[1] for s in rows)
        table.add_row(
            name,
            "-" if name == floor else f"{writes:.1f}",
            f"{wall * 1e3:.2f} ms",
            "-" if floor_wall is None else f"{wall / floor_wall:.2f}",
            "-" if name == floor else f"{(wall - main_wall) * 1e3:+.2f} ms",
        )
    console.print(table)


if __name__ == "__main__":
    main()
