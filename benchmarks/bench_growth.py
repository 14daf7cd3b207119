"""Store growth for a long conversation: does recording N turns cost O(N) or O(N²) bytes?

A 200-turn conversation through the openai SDK, recorded by pyrula (cassette mode "once", the
default fsync'd `Store`). Every turn re-sends the whole history so far: the user and assistant
messages of ~300 characters each, plus the new user message. After 50, 100 and 200 turns it
prints the store's size three ways, against the sum of the request bodies sent so far (what
keeping every request whole would cost, the O(N²) baseline) and, for reference, vcrpy's YAML
cassette of the same conversation:

* data.mdb file bytes (what `ls` shows; LMDB never shrinks its file);
* LMDB's high-water mark, (last_pgno + 1) x page size from `env.info()`;
* live pages x page size: branch + leaf + overflow pages of every database (`txn.stat`), i.e.
  the pages holding data now, without the free list.

Sizes are deterministic up to LMDB's page reuse; the recording is repeated `--rounds` times into
fresh stores and the table shows the median (min … max when they differ).

Run: python benchmarks/bench_growth.py [--rounds 2] [--turns 200]
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import httpx
import vcr
from _common import (
    MODEL,
    completion_json,
    console,
    header,
    json_response,
    lmdb_sizes,
    openai_client,
    parser,
    scratch_dir,
)
from _common import text_of as text
from rich.table import Table

import pyrula
from pyrula.journal.lmdb_store import LmdbStore

CHECKPOINTS = (50, 100, 200)
CHARS = 300


def user_message(turn: int) -> dict[str, str]:
    return {"role": "user", "content": text(CHARS, f"Turn {turn}: please continue the analysis.")}


def assistant_reply(turn: int) -> str:
    return text(CHARS, f"Answer {turn}: here is the next step of the analysis.")


def converse(client: Any, turns: int, on_turn: Any = None) -> None:
    history: list[dict[str, str]] = []
    for turn in range(1, turns + 1):
        history.append(user_message(turn))
        reply = client.chat.completions.create(model=MODEL, messages=history)
        content = reply.choices[0].message.content
        assert content == assistant_reply(turn)
        history.append({"role": "assistant", "content": content})
        if on_turn is not None:
            on_turn(turn)


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=2)
    args.add_argument("--turns", type=int, default=200)
    opts = args.parse_args()
    turns = opts.turns
    checkpoints = tuple(c for c in CHECKPOINTS if c <= turns) or (turns,)
    header("bench_growth: store growth over a long conversation", opts.rounds, turns=turns)

    request_bytes: list[int] = []
    reply_bytes: list[int] = []

    def provider(request: httpx.Request) -> httpx.Response:
        turn = (len(json.loads(request.content)["messages"]) + 1) // 2
        body = completion_json(assistant_reply(turn), completion_id=f"chatcmpl-{turn}")
        request_bytes.append(len(request.content))
        reply_bytes.append(len(body))
        return json_response(body)

    pyrula_client = openai_client(pyrula.HttpxTransport(httpx.MockTransport(provider)))
    floor_client = openai_client(httpx.MockTransport(provider))
    tmp = scratch_dir("growth", keep=opts.keep)

    sizes: dict[int, list[dict[str, int]]] = {c: [] for c in checkpoints}
    sums: dict[int, tuple[int, int]] = {}
    entries: dict[str, int] = {}
    for r in range(opts.rounds):
        request_bytes.clear()
        reply_bytes.clear()
        store = LmdbStore(tmp / f"store-{r}")  # the default store, typed as the one it is

        def checkpoint(turn: int, store: LmdbStore = store) -> None:
            if turn in sizes:
                sizes[turn].append(lmdb_sizes(store))
                sums[turn] = (sum(request_bytes), sum(reply_bytes))

        with pyrula.cassette("conversation", mode="once", store=store):
            converse(pyrula_client, turns, checkpoint)
        entries = store.stat()["entries"]
        store.close()
        console.print(f"  [dim]round {r + 1}/{opts.rounds}: recorded {turns} turns[/dim]")
    per_request = list(request_bytes)

    # The same conversation under vcrpy, its YAML written out at each checkpoint (vcrpy only
    # saves when the block ends, so this calls its cassette's `_save(force=True)` there).
    yaml_bytes: dict[int, int] = {}
    path = tmp / "vcr.yaml"
    with vcr.use_cassette(
        str(path), record_mode="all", filter_headers=["authorization"]
    ) as recording:

        def snapshot(turn: int) -> None:
            if turn in sizes:
                recording._save(force=True)
                yaml_bytes[turn] = path.stat().st_size

        converse(floor_client, turns, snapshot)

    table = Table(
        title=f"Store size after N turns (~{CHARS}-char messages, whole history re-sent each turn)",
        title_justify="left",
    )
    for column in (
        "turns",
        "Σ request bodies",
        "Σ reply bodies",
        "data.mdb file",
        "LMDB high-water",
        "LMDB live pages",
        "live / Σ requests",
        "vcrpy YAML",
        "YAML / Σ requests",
    ):
        table.add_column(column, justify="right")
    for c in checkpoints:
        req, rep = sums[c]
        live = statistics.median(s["live"] for s in sizes[c])
        table.add_row(
            str(c),
            _bytes(req),
            _bytes(rep),
            _spread([s["file"] for s in sizes[c]]),
            _spread([s["high_water"] for s in sizes[c]]),
            _spread([s["live"] for s in sizes[c]]),
            f"{live / req:.3f}",
            _bytes(yaml_bytes[c]),
            f"{yaml_bytes[c] / req:.2f}",
        )
    console.print(table)
    if len(checkpoints) >= 2:
        a, b = checkpoints[-2], checkpoints[-1]
        per_turn = (
            statistics.median(s["live"] for s in sizes[b])
            - statistics.median(s["live"] for s in sizes[a])
        ) / (b - a)
        console.print(
            f"live bytes added per turn between turns {a} and {b}: {per_turn:,.0f} "
            f"(the request body of turn {b} alone: {per_request[b - 1]:,} bytes; "
            f"of turn 1: {per_request[0]:,} bytes)"
        )
    console.print(f"store entries after {turns} turns: {entries}")


def _bytes(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.2f} MB"
    if n >= 1e3:
        return f"{n / 1e3:.1f} kB"
    return f"{n:.0f} B"


def _spread(values: list[int]) -> str:
    mid = _bytes(statistics.median(values))
    if min(values) == max(values):
        return mid
    return f"{mid} ({_bytes(min(values))} … {_bytes(max(values))})"


if __name__ == "__main__":
    main()
