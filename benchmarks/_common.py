"""Shared pieces of the benchmarks: fake provider replies, SDK clients, timing rounds, tables.

Every benchmark measures its baseline in the same run, interleaving the variants in short slices
(the order rotates every slice) so a noisy neighbour on the machine hits all of them alike. Each
sample records wall-clock and process CPU time; tables show medians over the rounds and the best
slice.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import httpx
import openai
from rich.console import Console
from rich.table import Table

from pyrula.journal.lmdb_store import LmdbStore

T = TypeVar("T")

API_KEY = "sk-bench-" + "k" * 32
BASE_URL = "http://openai.test/v1"
MODEL = "gpt-4o-mini"

console = Console(width=int(os.environ.get("BENCH_WIDTH", "120")), highlight=False)

FILLER = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the quarterly "
    "figures, and nobody is quite sure whether the projections account for seasonal demand. "
)


def text_of(length: int, seed: str) -> str:
    """Deterministic prose of exactly `length` characters, starting with `seed`."""
    text = seed + " "
    while len(text) < length:
        text += FILLER
    return text[:length]


def completion_json(content: str, *, completion_id: str = "chatcmpl-bench") -> bytes:
    """A realistic non-streamed chat.completion body."""
    return json.dumps(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": 1_750_000_000,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 48, "total_tokens": 60},
            "system_fingerprint": "fp_bench",
        }
    ).encode()


REPLY_HEADERS = {"content-type": "application/json", "x-request-id": "req_bench"}


def json_response(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers=REPLY_HEADERS)


# openai 3.x annotates `http_client` as an `httpx2` client, and takes an `httpx` one all the same
# (its `is_legacy_httpx_sync_client` / `is_legacy_httpx_async_client` checks): the benchmarks run
# the SDK on httpx, which vcrpy patches, so every variant is compared on one stack.


def openai_client(
    transport: httpx.BaseTransport | None = None, *, base_url: str = BASE_URL
) -> openai.OpenAI:
    """The sync openai SDK over an `httpx.Client` (openai 3.x accepts one) with no retries."""
    http_client = httpx.Client(transport=transport) if transport is not None else httpx.Client()
    return openai.OpenAI(
        api_key=API_KEY,
        base_url=base_url,
        http_client=http_client,  # type: ignore[arg-type]  # an httpx client: see above
        max_retries=0,
    )


def async_openai_client(
    transport: httpx.AsyncBaseTransport, *, api_key: str = API_KEY
) -> openai.AsyncOpenAI:
    """The async openai SDK over an `httpx.AsyncClient` with no retries (see `openai_client`)."""
    return openai.AsyncOpenAI(
        api_key=api_key,
        http_client=httpx.AsyncClient(transport=transport),  # type: ignore[arg-type]  # see above
        max_retries=0,
    )


# -- timing ----------------------------------------------------------------------------------------


@dataclass
class Samples:
    """Per-operation seconds: one entry per round, and one per slice (for the best case)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    slice_cpu: list[float] = field(default_factory=list)

    @property
    def wall_median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def cpu_best(self) -> float:
        return min(self.slice_cpu)


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    """Run `fn` (which returns how many operations it did); (wall s, cpu s, ops)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    ops = fn()
    return time.perf_counter() - wall0, time.process_time() - cpu0, ops


class DeviceWrites(NamedTuple):
    """What the disk under a folder was asked to write: the write requests it completed and
    the 4 KiB pages they carried."""

    requests: float
    pages: float

    def per(self, n: int) -> DeviceWrites:
        return DeviceWrites(self.requests / n, self.pages / n)


def _device_counts(folder: Path) -> tuple[int, int] | None:
    """(write requests completed, 512-byte sectors written) so far by the block device holding
    `folder` (Linux `/sys/dev/block/MAJ:MIN/stat`, fields 5 and 7), or None where there is none
    (a tmpfs, another OS)."""
    try:
        device = os.stat(folder).st_dev
        name = f"/sys/dev/block/{os.major(device)}:{os.minor(device)}/stat"
        with open(name) as handle:
            fields = handle.read().split()
        return int(fields[4]), int(fields[6])
    except (OSError, IndexError, ValueError):
        return None


def device_writes(fn: Callable[[], T], folder: Path) -> tuple[T, DeviceWrites | None]:
    """`fn()`, and what the disk under `folder` wrote meanwhile (None where it cannot be read).

    Counted at the device, not per process: `/proc/self/io`'s `write_bytes` counts each page
    cache folio a write dirties at its whole size, and a kernel that caches the file in large
    folios (ext4 on Linux 6.16+) after it was read through a map (a scan, a prune) counts one
    4 KiB `pwrite` as up to 16 pages or more. The device's count is what a flush waits for.
    It covers every process on the machine: run it with nothing else writing to that disk.
    """
    before = _device_counts(folder)
    result = fn()
    after = _device_counts(folder)
    if before is None or after is None:
        return result, None
    return result, DeviceWrites(after[0] - before[0], (after[1] - before[1]) / 8)


def run_rounds(
    variants: dict[str, Callable[[], int]],
    rounds: int,
    *,
    slices: int = 1,
    label: str = "",
) -> dict[str, Samples]:
    """Time every variant `slices` times per round, interleaved, rotating the order each slice.

    A round's sample for a variant is its total time over its total operations; the best case is
    the fastest slice. Interleaving in slices spreads a noisy neighbour across all variants.
    """
    names = list(variants)
    results = {name: Samples() for name in names}
    for r in range(rounds):
        gc.collect()
        totals = {name: (0.0, 0.0, 0) for name in names}  # wall s, cpu s, ops
        for s in range(slices):
            k = (r * slices + s) % len(names)
            for name in names[k:] + names[:k]:
                wall, cpu, ops = timed(variants[name])
                total_wall, total_cpu, total_ops = totals[name]
                totals[name] = (total_wall + wall, total_cpu + cpu, total_ops + ops)
                results[name].slice_cpu.append(cpu / ops)
        for name, (wall, cpu, ops) in totals.items():
            results[name].wall.append(wall / ops)
            results[name].cpu.append(cpu / ops)
        if label:
            console.print(f"  [dim]{label}: round {r + 1}/{rounds} done[/dim]")
    return results


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def rate_table(
    title: str,
    results: dict[str, Samples],
    baseline: str,
    *,
    unit: str = "req",
) -> Table:
    """Medians per operation, operations per second, and ratios against `baseline`."""
    table = Table(title=title, title_justify="left")
    table.add_column("variant")
    table.add_column("median/op wall", justify="right")
    table.add_column(f"{unit}/s wall", justify="right")
    table.add_column("x base wall", justify="right")
    table.add_column("median/op CPU", justify="right")
    table.add_column("x base CPU", justify="right")
    table.add_column("best/op CPU", justify="right")
    table.add_column("x base best", justify="right")
    base = results[baseline]
    for name, s in results.items():
        table.add_row(
            name,
            fmt_time(s.wall_median),
            f"{1 / s.wall_median:,.0f}",
            f"{s.wall_median / base.wall_median:.3f}",
            fmt_time(s.cpu_median),
            f"{s.cpu_median / base.cpu_median:.3f}",
            fmt_time(s.cpu_best),
            f"{s.cpu_best / base.cpu_best:.3f}",
        )
    return table


def lmdb_sizes(store: LmdbStore) -> dict[str, int]:
    """A store's data.mdb bytes, LMDB high-water bytes and live-page bytes.

    High-water is (last_pgno + 1) x page size from `env.info()`; live pages are the branch, leaf
    and overflow pages of the main database and every named one (`txn.stat`), without the free
    list: the bytes that hold data now.
    """
    env = store.env
    page = env.stat()["psize"]
    main = env.stat()
    pages = main["branch_pages"] + main["leaf_pages"] + main["overflow_pages"]
    with store.read() as txn:
        for name in store.stat()["entries"]:
            db = store.db(name)
            if db is not None:
                s = txn.txn.stat(db)  # the binding's transaction under the store's
                pages += s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]
    return {
        "file": (store.path / "data.mdb").stat().st_size,
        "high_water": (env.info()["last_pgno"] + 1) * page,
        "live": pages * page,
    }


def parser(description: str, rounds: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--rounds", type=int, default=rounds, help=f"timing rounds (default {rounds})")
    p.add_argument("--keep", action="store_true", help="keep the temp dir of stores and cassettes")
    return p


def scratch_dir(name: str, *, keep: bool = False) -> Path:
    """A temp dir for this run's stores and cassettes, removed at exit unless `keep`."""
    path = Path(tempfile.mkdtemp(prefix=f"pyrula-bench-{name}-"))
    if keep:
        console.print(f"keeping {path}")
    else:
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def header(name: str, rounds: int, **extra: Any) -> None:
    import httpx2
    import lmdb
    import vcr

    import pyrula

    console.rule(f"[bold]{name}")
    facts = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "pyrula": pyrula.__version__,
        "openai": openai.__version__,
        "httpx": httpx.__version__,
        "httpx2": httpx2.__version__,
        "vcrpy": vcr.__version__,
        "lmdb": lmdb.__version__,
        "rounds": rounds,
        **extra,
    }
    console.print(", ".join(f"{k} {v}" for k, v in facts.items()))


# -- instruction counts (callgrind) ----------------------------------------------------------------
#
# Wall and CPU time move with the machine's load; instruction counts do not. A benchmark's
# `--callgrind` runs it again as a child under `valgrind --tool=callgrind --dump-before=getppid`:
# the child sets up and warms every variant, then calls `cg_mark()` (`os.getppid()`, which nothing
# else on these paths calls) before and after each measured segment. Callgrind dumps its counters
# (and zeroes them) at every mark, so each dump between two marks holds exactly one segment's
# instructions: one valgrind run measures every variant, baseline included.

CALLGRIND_CHILD = "--callgrind-child"


def cg_mark() -> None:
    """The boundary of a measured segment in a callgrind child (see above)."""
    os.getppid()


def callgrind_segments(
    script: str, *args: str, keep: Path | None = None, tree: Path | None = None
) -> list[int]:
    """Run `script --callgrind-child *args` under callgrind; instructions of each segment.

    The child calls `cg_mark()` once before its first segment and once after each one; segment
    k is dump k + 2 (dump 1 is everything up to the first mark: imports, setup, warm-up).
    With `keep`, the dumps are left in that folder (`cg.out.<k>`) for `callgrind_annotate`.
    With `tree` (from `before_tree`), the child imports pyrula from there.
    """
    import subprocess
    import sys

    if shutil.which("valgrind") is None:
        raise SystemExit("--callgrind needs valgrind (apt-get install valgrind)")
    out = keep if keep is not None else Path(tempfile.mkdtemp(prefix="pyrula-bench-cg-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=getppid",
            f"--callgrind-out-file={out}/cg.out",
            sys.executable,
            script,
            CALLGRIND_CHILD,
            *args,
        ]
        env = with_tree({**os.environ, "PYTHONHASHSEED": "0"}, tree)
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"callgrind child failed ({done.returncode}):\n{done.stderr[-4000:]}")
        counts = []
        dumps = sorted(out.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        for dump in dumps[1:]:
            for line in dump.read_text().splitlines():
                if line.startswith("summary:"):
                    counts.append(int(line.split()[1]))
                    break
        return counts
    finally:
        if keep is None:
            shutil.rmtree(out, ignore_errors=True)


def instructions_table(title: str, per_op: dict[str, float], baseline: str) -> Table:
    """Instructions per operation and their ratio to `baseline` (measured in the same child)."""
    table = Table(title=title, title_justify="left")
    table.add_column("variant")
    table.add_column("instructions/op", justify="right")
    table.add_column("x base", justify="right")
    table.add_column("added/op", justify="right")
    base = per_op[baseline]
    for name, count in per_op.items():
        table.add_row(
            name,
            f"{count / 1e3:,.0f}k",
            f"[bold]{count / base:.3f}[/bold]",
            f"{(count - base) / 1e3:+,.0f}k",
        )
    return table


def with_tree(env: dict[str, str], tree: Path | None) -> dict[str, str]:
    """`env` for a child that imports pyrula from `tree` (a `before_tree`) ahead of the
    installed package; `env` itself when `tree` is None."""
    if tree is None:
        return env
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))}


def before_tree(ref: str, folder: Path) -> Path:
    """The package as it was at `ref`, laid out as installed (fingerprints and proxy inside)."""
    tree = folder / "before"
    root = str(Path(__file__).resolve().parents[1])
    archive = subprocess.run(
        ["git", "-C", root, "archive", "--format=tar", ref, "pyrula", "fingerprints", "proxy"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    for sub in ("fingerprints", "proxy"):
        (tree / sub).rename(tree / "pyrula" / sub)
    return tree
