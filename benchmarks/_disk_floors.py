"""The disk alone, as a recording's commit uses it: the rows `bench_record.py` sets beside its
loopback rows, so the flushes' share of a recorded call is read against what the disk does with
no HTTP and no pyrula at all."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

from _common import DeviceWrites, device_writes

FLUSH = "disk: one 4 KiB overwrite + os.fsync per call, no HTTP"


def flush_floor(n: int, folder: Path) -> Callable[[], int]:
    """n flushes of a 4 KiB overwrite in `folder` (the stores' folder: the same disk), as a
    recorded call's commit flushes its pages; the file is written once first, so no flush
    carries a change of length."""
    path = folder / "flush-floor"
    path.write_bytes(b"\0" * 4096)
    page = b"x" * 4096

    def run() -> int:
        fd = os.open(path, os.O_WRONLY)
        try:
            for _ in range(n):
                os.pwrite(fd, page, 0)
                os.fsync(fd)
        finally:
            os.close(fd)
        return n

    return run


COMMIT = "disk: one exchange's commit as LMDB writes it, no HTTP"
CONTIGUOUS = "disk: the same pages in one run, then the meta page, no HTTP"


def writes_per_commit(record: Callable[[], int], folder: Path) -> DeviceWrites | None:
    """What the disk under `folder` wrote per recorded exchange, counted around `record` (the
    default store's recorder: one commit per exchange, every page flushed); the meta page is
    one of its writes. None where the device's counts cannot be read."""
    calls, writes = device_writes(record, folder)
    return None if writes is None else writes.per(calls)


def commit_pattern(
    n: int, folder: Path, pages: int, *, contiguous: bool = False
) -> Callable[[], int]:
    """n commits as LMDB makes one on the default store: `pages - 1` data pages written where
    its free pages are (scattered over the file: here at random page offsets of a 4 MiB file,
    about the size of a store after 1,000 exchanges), one `fdatasync`, then the meta page's
    120 bytes through an O_DSYNC descriptor. With `contiguous`, the same pages go in one run
    (as an append-ordered layout would write them). The file is written once first, so no
    flush carries a change of length."""
    path = folder / ("commit-run" if contiguous else "commit-pattern")
    spread = 1024
    path.write_bytes(b"\0" * 4096 * spread)
    page = b"x" * 4096
    meta = b"m" * 120
    chosen = random.Random(0)

    def run() -> int:
        data = os.open(path, os.O_WRONLY)
        meta_fd = os.open(path, os.O_WRONLY | os.O_DSYNC)
        try:
            for i in range(n):
                if contiguous:
                    start = 2 + (i * (pages - 1)) % (spread - pages - 2)
                    os.pwrite(data, page * (pages - 1), start * 4096)
                else:
                    for number in chosen.sample(range(2, spread), pages - 1):
                        os.pwrite(data, page, number * 4096)
                os.fdatasync(data)
                os.pwrite(meta_fd, meta, 32 + (i % 2) * 4096)
        finally:
            os.close(data)
            os.close(meta_fd)
        return n

    return run
