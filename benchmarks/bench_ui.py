"""`pyrula ui` on a big store: time to first byte of the exchange list and of a run timeline.

Two stores are built the same way through the store's own APIs (`Exchanges.put`,
`RunStore.submit` / `append` / `update`, `sync=False` to build quickly):

* big: 100,000 exchanges in 100 cassettes and 10,000 runs (each with 3 events), plus one run of
  500 events (steps, model calls linked to exchanges, an interrupt and its answer);
* baseline: 5,000 exchanges and 500 runs, plus the same 500-event run (every page shows as
  many rows as on the big store: 50 per cassette).

The page is served by uvicorn on 127.0.0.1 in this process's thread, and each page is fetched
with `http.client` (a fresh connection each time): time to first byte is request sent -> status
line read (the server renders the whole page before it sends, so it is also the render time);
`total` adds reading the body. Rounds interleave the pages and the two stores. The ratio
big/baseline is the point: a page that loaded everything would grow with the store.

Run: .venv/bin/python benchmarks/bench_ui.py [--rounds 15] [--exchanges 100000] [--runs 10000]
Needs the ui extra (`pip install -e '.[dev,ui]'`).
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

from pyrula.journal.exchanges import Exchange, Exchanges
from pyrula.journal.keys import cassette_key
from pyrula.journal.store import Store
from pyrula.runtime import RunStore
from pyrula.ui import create_app

TIMELINE_EVENTS = 500


def _reply(i: int) -> bytes:
    return (
        b'{"id":"chatcmpl-%d","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,'
        b'"message":{"role":"assistant","content":"answer %d"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}' % (i, i)
    )


def build(path: Path, exchanges: int, runs: int) -> str:
    """Fill a store; return the id of its 500-event run."""
    store = Store(path, sync=False, map_size=8 << 30)
    journal = Exchanges(store)
    for i in range(exchanges):
        fingerprint = f"{i:064x}"
        journal.put(
            cassette_key(f"tests/test_case_{i % 100:03d}", fingerprint, 0),
            Exchange(
                request_doc={
                    "surface": "openai.chat",
                    "compared": {"messages": [{"role": "user", "content": f"question {i}"}]},
                    "meta": {"model": "gpt-4o-mini"},
                },
                surface="openai.chat",
                fingerprint=fingerprint,
                method="POST",
                url="https://api.openai.com/v1/chat/completions",
                status=200,
                headers=[("content-type", "application/json")],
                frames=[_reply(i)],
                streamed=False,
                elapsed_ms=120.0,
                namespace=f"tests/test_case_{i % 100:03d}",
            ),
        )
    run_store = RunStore(store)
    for i in range(runs):
        run, _ = run_store.submit(f"workflow_{i % 7}", {"ticket": i})
        run_store.append(run.id, None, "run:attempt", {"attempt": 1, "worker": "bench"})
        run_store.append(
            run.id,
            None,
            "llm:done",
            {
                "model": "gpt-4o-mini",
                "total_tokens": 17,
                "cost_usd": 0.00001,
                "position": "main/llm0",
            },
        )
        run_store.append(run.id, None, "run:done", {"result": i})
        run_store.update(run.id, status="completed", attempt=1)
    long_run, _ = run_store.submit("long_agent", {"ticket": "long"})
    run_store.append(long_run.id, None, "run:attempt", {"attempt": 1, "worker": "bench"})
    for n in range(TIMELINE_EVENTS - 2):
        if n % 2:
            run_store.append(
                long_run.id,
                None,
                "step:done",
                {"position": f"main/step{n}", "name": f"s{n}", "result": n},
            )
        else:
            run_store.append(
                long_run.id,
                None,
                "llm:done",
                {
                    "model": "gpt-4o-mini",
                    "total_tokens": 17,
                    "cost_usd": 0.00001,
                    "position": f"main/llm{n}",
                    "exchange": f"{n:032x}",
                },
            )
    run_store.append(long_run.id, None, "run:done", {"result": "ok"})
    run_store.update(long_run.id, status="completed", attempt=1)
    store.close()
    return long_run.id


class Served:
    def __init__(self, path: Path) -> None:
        app = create_app(path)
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def fetch(self, path: str) -> tuple[float, float, int]:
        """(time to first byte, total, body bytes) of one GET, on a fresh connection."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        connection.connect()
        start = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        first = time.perf_counter() - start
        body = response.read()
        total = time.perf_counter() - start
        connection.close()
        assert response.status == 200, (path, response.status, body[:300])
        return first, total, len(body)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--exchanges", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pyrula-bench-ui-"))
    sizes = {"baseline": (5_000, 500), "big": (args.exchanges, args.runs)}
    served: dict[str, Served] = {}
    pages: dict[str, dict[str, str]] = {}
    try:
        for name, (exchanges, runs) in sizes.items():
            began = time.perf_counter()
            long_run = build(base / name, exchanges, runs)
            print(
                f"built {name}: {exchanges:,} exchanges, {runs:,} runs + one of "
                f"{TIMELINE_EVENTS} events in {time.perf_counter() - began:.1f} s"
            )
            served[name] = Served(base / name)
            pages[name] = {
                "exchange list (first page)": "/exchanges",
                "exchange list, cassette filter": "/exchanges?cassette=tests/test_case_042",
                "exchange list, model filter (reads documents)": "/exchanges?model=gpt-4o",
                f"run timeline ({TIMELINE_EVENTS} events)": f"/runs/{long_run}",
                "run list (first page)": "/runs",
            }
        samples: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        for name in sizes:  # warm-up: templates compiled, pages cached by the OS
            for path in pages[name].values():
                served[name].fetch(path)
        for round_number in range(args.rounds):
            order = list(sizes) if round_number % 2 == 0 else list(reversed(sizes))
            for label in pages["big"]:
                for name in order:
                    samples.setdefault((label, name), []).append(
                        served[name].fetch(pages[name][label])
                    )
        print(f"\nmedian of {args.rounds} rounds, ms (time to first byte / total; body size)")
        print(f"{'page':48} {'baseline':>20} {'big':>20} {'ratio':>7}")
        for label in pages["big"]:
            cells = []
            for name in sizes:
                got = samples[(label, name)]
                ttfb = statistics.median(s[0] for s in got) * 1000
                total = statistics.median(s[1] for s in got) * 1000
                cells.append((ttfb, total, got[0][2]))
            ratio = cells[1][0] / cells[0][0]
            print(
                f"{label:48} {cells[0][0]:8.1f} / {cells[0][1]:7.1f} "
                f"{cells[1][0]:8.1f} / {cells[1][1]:7.1f} {ratio:6.2f}x"
                f"  ({cells[0][2] / 1000:.0f} kB, {cells[1][2] / 1000:.0f} kB)"
            )
    finally:
        for one in served.values():
            one.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
