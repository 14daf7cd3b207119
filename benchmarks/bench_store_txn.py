"""What the truncation check costs each store transaction.

Before every read or write transaction, `Store` checks that `data.mdb` still holds every page
its newest meta page names (one `stat`, and two 152-byte `pread`s when the file changed;
`pyrula.journal.lmdb_file`), so a file cut under an open store raises `StoreCorrupt` instead of
killing the process with SIGBUS. This times a read of one small record (`store.read()` +
`txn.get`) and a replayed exchange lookup (`Exchanges.get`), each with the check and with it
switched off, interleaved in slices, and prints the medians and the ratio. A baseline measured
in the same run; nothing else.

    .venv/bin/python benchmarks/bench_store_txn.py [--rounds 7] [--calls 20000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from pyrula.journal import Exchange, Exchanges
from pyrula.journal.lmdb_store import LmdbStore


def _timed(fn: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls * 1e6


def _unchecked() -> None:
    """`LmdbStore._check_length` switched off."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = LmdbStore(Path(folder) / "store")  # the check is the LMDB store's
        exchanges = Exchanges(store)
        exchanges.put(
            b"k",
            Exchange(
                request_doc={"surface": "generic", "compared": {"q": 1}, "meta": {}},
                surface="generic",
                fingerprint="0" * 64,
                method="POST",
                url="http://x.test/",
                status=200,
                headers=[("content-type", "application/json")],
                frames=[b'{"answer": "' + b"x" * 800 + b'"}'],
                streamed=False,
                elapsed_ms=1.0,
            ),
        )
        checked = store._check_length

        def read() -> object:
            with store.read() as txn:
                return txn.get(b"format", db=store.meta_db)

        def lookup() -> object:
            return exchanges.get(b"k")

        rows: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for name, fn in (("read txn", read), ("Exchanges.get", lookup)):
                for variant, check in (("off", _unchecked), ("on", checked)):
                    with mock.patch.object(store, "_check_length", check):
                        rows.setdefault(f"{name} {variant}", []).append(_timed(fn, args.calls))
        store.close()
    print(f"{'operation':<22}{'median µs':>12}{'ratio':>9}")
    for name in ("read txn", "Exchanges.get"):
        off = statistics.median(rows[f"{name} off"])
        on = statistics.median(rows[f"{name} on"])
        print(f"{name + ' (no check)':<22}{off:>12.2f}{1:>9.2f}")
        print(f"{name + ' (checked)':<22}{on:>12.2f}{on / off:>9.2f}  (+{on - off:.2f} µs)")


if __name__ == "__main__":
    main()
