"""A recording's request side as the history grows: what `recorder.request_side` costs (the
secrets to mask, the scrubbed request document with its blobs, the sent digest) for a chat
completion of one message and of a 200-message conversation (100 user and 100 assistant
messages of ~100 and ~340 characters), once the request is canonicalised.

Each tree runs in a child process of its own: the current code, and with `--before REF` the
pyrula of git revision REF (`git archive`, imported ahead of the installed package). The trees
alternate round by round; a round's figure is the best of seven timings, and the table gives the
median over rounds and the ratio of now to before.

Run: python benchmarks/bench_request_side.py [--rounds 5] [--before REF]
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

from _common import before_tree, console, header, parser, scratch_dir, with_tree
from rich.table import Table

SIZES = {"1 message": 0, "200 messages": 100}  # conversation turns before the last question
CHILD = "--child"


def request(turns: int) -> tuple[str, dict[str, str], bytes]:
    messages: list[dict[str, str]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Question {turn}: summarise the figures."})
        messages.append({"role": "assistant", "content": "Recorded answer. " * 20})
    messages.append({"role": "user", "content": "Question: summarise the attached figures."})
    body = json.dumps({"model": "gpt-4o-mini", "messages": messages}).encode()
    headers = {"authorization": "Bearer sk-test-0123456789abcdefghij", "content-type": "json"}
    return "https://api.openai.com/v1/chat/completions", headers, body


def child() -> None:
    """Times `request_side` for each size; prints microseconds per call as JSON."""
    from pyrula.fingerprints import RequestParts, canonicalize

    from pyrula.journal import recorder

    timings = {}
    for name, turns in SIZES.items():
        url, headers, body = request(turns)
        parts = RequestParts("POST", url, headers, body)
        canonical = canonicalize(parts)
        number = 2000 if turns == 0 else 40
        call = functools.partial(recorder.request_side, parts, canonical)
        best = min(timeit.repeat(call, number=number, repeat=7))
        timings[name] = best / number * 1e6
    print(json.dumps(timings))


def run_tree(tree: Path | None) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, CHILD],
        env=with_tree(dict(os.environ), tree),
        capture_output=True,
        text=True,
        check=True,
    )
    timings: dict[str, float] = json.loads(done.stdout)
    return timings


def main() -> None:
    args = parser(__doc__.splitlines()[0], rounds=5)
    args.add_argument("--before", metavar="REF", help="also time this git revision's pyrula")
    opts = args.parse_args()
    header("bench_request_side: a recording's request side", opts.rounds)
    trees: dict[str, Path | None] = {"now": None}
    if opts.before:
        folder = scratch_dir("request-side", keep=opts.keep)
        trees = {f"before ({opts.before})": before_tree(opts.before, folder), **trees}
    rounds: dict[str, list[dict[str, float]]] = {which: [] for which in trees}
    for r in range(opts.rounds):
        for which, tree in trees.items():
            rounds[which].append(run_tree(tree))
        console.print(f"  [dim]round {r + 1}/{opts.rounds} done[/dim]")
    table = Table(title="recorder.request_side, µs per call (median over rounds of the best of 7)")
    table.add_column("request")
    for which in trees:
        table.add_column(which, justify="right")
    if opts.before:
        table.add_column("now / before", justify="right")
    for name in SIZES:
        medians = [statistics.median(row[name] for row in rounds[which]) for which in trees]
        cells = [f"{m:,.1f}" for m in medians]
        if opts.before:
            cells.append(f"{medians[-1] / medians[0]:.3f}")
        table.add_row(name, *cells)
    console.print(table)


if __name__ == "__main__":
    if sys.argv[1:] == [CHILD]:
        child()
    else:
        main()
