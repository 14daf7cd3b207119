"""Start-up cost: importing a drop-in, and a worker's start, against importing the SDK alone.

Each figure is the best of ROUNDS fresh interpreters, as wall-clock and as the child's CPU time
(user + system, which a loaded machine disturbs far less than wall time). The baseline is the
same interpreter importing only the SDK, measured in the same run and interleaved with the
others, so the machine's load hits all alike; the `x SDK` column is each case over `import
openai` (over `import anthropic` for the anthropic rows).

The worker rows run `pyrula worker --import APP --until-idle` on an app that imports the openai
drop-in and defines one workflow: "to its first run" is the time from exec to the first line of
a queued run's body (the body writes the clock and its process's CPU time: the worker's imports,
opening the store, the registry, the event loop and the claim are all in it); "to exit, nothing
queued" is the whole process on an empty store.

Bytecode: every child reads and writes its compiled modules in a cache of this run's own
(`PYTHONPYCACHEPREFIX`), warmed by one uncounted round, so each figure is an import from `.pyc`
files as after `pip install`, whatever the venv holds or `PYTHONDONTWRITEBYTECODE` says.
`--as-installed` measures the other case: the children use the bytecode the installation holds
(the stdlib's `__pycache__`, and the venv's if its installer compiled it; uv and
`PYTHONDONTWRITEBYTECODE=1` leave none, so every such module compiles from source each time).

With `--before REF` every pyrula case is also measured on the code of that git revision
(`git archive`, imported ahead of the installed package through PYTHONPATH), interleaved with
the current code, and the table prints both.

`--callgrind` adds instruction counts (valgrind), which the machine's load does not change: one
child per case under `valgrind --tool=callgrind --dump-before=getppid`, counted from exec to a
mark (`os.getppid()`) placed after the import, or at the first line of the worker's first run;
the worker that exits with nothing queued is counted whole, exec to exit.
The counts include the interpreter's own start (the `python -c pass` row); the `added` column is
each case minus `import openai` from the same run.

    python benchmarks/bench_import.py [--rounds 7] [--before 5d84888] [--callgrind] [--as-installed]

The SDK's version is whatever the interpreter running this script has installed: run it from
another venv to measure another release (benchmarks/README.md has the floor's).
`python -X importtime -c "import pyrula.agents.compat.openai" 2>&1 | sort -t'|' -k2 -n | tail`
shows where the rest goes, module by module (run it from a small directory: the first import
lists the current directory).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from _common import before_tree, with_tree

ROOT = Path(__file__).resolve().parents[1]

SDK_CASES = {
    "python -c pass (floor)": "pass",
    "import openai (baseline)": "import openai",
    "import anthropic": "import anthropic",
}
PYRULA_CASES = {
    "import pyrula.agents.compat.openai": "import pyrula.agents.compat.openai",
    "import pyrula.agents.compat.anthropic": "import pyrula.agents.compat.anthropic",
}
WORKER_FIRST = "pyrula worker, to its first run (openai app)"
WORKER_IDLE = "pyrula worker, to exit, nothing queued"
# What an openai-only import must not load: the other providers' SDKs.
FOREIGN = ("anthropic", "google.genai", "boto3", "botocore")
MARK = "import os; os.getppid()"  # where callgrind dumps (--dump-before=getppid)
HAVE_ANTHROPIC = importlib.util.find_spec("anthropic") is not None  # else its rows are skipped

# An app of one workflow that uses openai only. The body reports when it began: the wall clock,
# and the process's CPU time, to the file BENCH_FIRST_RUN names; then the callgrind mark.
APP = """\
import os
import time

from pyrula.agents.compat import AsyncOpenAI  # noqa: F401  (the app's model client)
from pyrula.runtime import workflow


@workflow
async def bench(ctx):
    report = os.environ.get("BENCH_FIRST_RUN")
    if report:
        with open(report, "w") as out:
            out.write(f"{time.time()} {time.process_time()}")
    os.getppid()
"""


class Children:
    """How the children start: the interpreter, the bytecode cache, the tree under test."""

    def __init__(self, folder: Path, *, as_installed: bool) -> None:
        self.folder = folder
        self.as_installed = as_installed
        self.cache = folder / "pycache"
        self.cache.mkdir()
        self.app_dir = folder / "app"
        self.app_dir.mkdir()
        (self.app_dir / "bench_app.py").write_text(APP)
        self.serial = 0

    def env(self, tree: Path | None, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        if self.as_installed:
            env.pop("PYTHONPYCACHEPREFIX", None)
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env["PYTHONPYCACHEPREFIX"] = str(self.cache)
        return {**with_tree(env, tree), **extra}

    def store(self, tree: Path | None, *, queued: bool) -> Path:
        """A fresh store (with one run of `bench` queued, or none)."""
        self.serial += 1
        store = self.folder / f"store{self.serial}"
        code = (
            f"from pyrula.runtime import submit; submit('bench', store={str(store)!r})"
            if queued
            else f"from pyrula.journal import Store; Store({str(store)!r}, create=True).close()"
        )
        subprocess.run(
            [sys.executable, "-c", code], check=True, env=self.env(tree), cwd=self.app_dir
        )
        return store

    def worker_argv(self, store: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pyrula.cli.app",
            "worker",
            "--import",
            "bench_app",
            "--store",
            str(store),
            "--until-idle",
            "--quiet",
        ]


def _run(argv: list[str], *, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process, started in `cwd` (never in a checkout,
    whose `pyrula/` folder would shadow the revision under test)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, env=env, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _worker_first_run(children: Children, tree: Path | None) -> tuple[float, float]:
    """Exec to the first line of the first run's body: (wall seconds, the worker's CPU seconds)."""
    store = children.store(tree, queued=True)
    report = children.folder / f"first-run{children.serial}"
    env = children.env(tree, BENCH_FIRST_RUN=str(report))
    started = time.time()
    subprocess.run(
        children.worker_argv(store), check=True, env=env, cwd=children.app_dir, capture_output=True
    )
    at, cpu = (float(x) for x in report.read_text().split())
    return at - started, cpu


def _worker_idle(children: Children, tree: Path | None) -> tuple[float, float]:
    store = children.store(tree, queued=False)
    return _run(children.worker_argv(store), env=children.env(tree), cwd=children.app_dir)


def _foreign(children: Children, tree: Path | None) -> list[str]:
    code = (
        "import sys, pyrula.agents.compat.openai; "
        f"print(' '.join(m for m in {FOREIGN!r} if m in sys.modules))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env=children.env(tree),
        cwd=children.app_dir,
        capture_output=True,
        text=True,
    )
    return found.stdout.split()


def _instructions(
    argv: list[str], env: dict[str, str], cwd: Path, out: Path, *, whole: bool = False
) -> int:
    """Instructions from exec to the first `os.getppid()` (or, `whole`, to the process's end:
    every dump summed), counted by callgrind."""
    out.mkdir()
    command = [
        "valgrind",
        "--tool=callgrind",
        "--dump-before=getppid",
        f"--callgrind-out-file={out}/cg.out",
        *argv,
    ]
    done = subprocess.run(
        command, env={**env, "PYTHONHASHSEED": "0"}, cwd=cwd, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"callgrind child failed ({done.returncode}):\n{done.stderr[-4000:]}")
    if whole:
        return sum(_summary(dump) for dump in out.glob("cg.out*"))
    first = out / "cg.out.1"
    if not first.exists():
        raise SystemExit(f"callgrind child never reached its mark: {' '.join(argv)}")
    return _summary(first)


def _summary(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise SystemExit(f"no summary in {dump}")


def _callgrind(children: Children, trees: dict[str, Path | None]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    cases = {"python -c pass (floor)": "pass", "import openai (baseline)": "import openai"}
    for case, code in cases.items():
        argv = [sys.executable, "-c", f"{code}; {MARK}"]
        out = children.folder / f"cg{len(counts)}"
        counts[("sdk", case)] = _instructions(argv, children.env(None), children.app_dir, out)
    for label, tree in trees.items():
        case = "import pyrula.agents.compat.openai"
        argv = [sys.executable, "-c", f"{case}; {MARK}"]
        out = children.folder / f"cg{len(counts)}"
        counts[(label, case)] = _instructions(argv, children.env(tree), children.app_dir, out)
        argv = children.worker_argv(children.store(tree, queued=True))
        out = children.folder / f"cg{len(counts)}"
        counts[(label, WORKER_FIRST)] = _instructions(
            argv, children.env(tree), children.app_dir, out
        )
        argv = children.worker_argv(children.store(tree, queued=False))
        out = children.folder / f"cg{len(counts)}"
        counts[(label, WORKER_IDLE)] = _instructions(
            argv, children.env(tree), children.app_dir, out, whole=True
        )
    return counts


def _versions() -> str:
    names = ("openai", "anthropic", "typer", "lmdb", "pydantic")
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", metavar="REF", help="also measure this git revision")
    parser.add_argument("--callgrind", action="store_true", help="count instructions (valgrind)")
    parser.add_argument(
        "--as-installed", action="store_true", help="only the bytecode the installation holds"
    )
    options = parser.parse_args()
    if options.callgrind and shutil.which("valgrind") is None:
        raise SystemExit("--callgrind needs valgrind (apt-get install valgrind)")
    best: dict[tuple[str, str], tuple[float, float]] = {}
    load_at_start = os.getloadavg()[0]

    def keep(key: tuple[str, str], sample: tuple[float, float]) -> None:
        wall, cpu = best.get(key, (float("inf"), float("inf")))
        best[key] = (min(wall, sample[0]), min(cpu, sample[1]))

    with tempfile.TemporaryDirectory() as name:
        children = Children(Path(name), as_installed=options.as_installed)
        trees: dict[str, Path | None] = {"now": None}
        if options.before:
            trees = {"before": before_tree(options.before, children.folder), "now": None}
        here = children.app_dir
        for i in range(options.rounds + 1):  # round 0 fills the bytecode cache; not counted
            sample = keep if i else (lambda key, sample: None)
            for case, code in SDK_CASES.items():
                if "anthropic" in code and not HAVE_ANTHROPIC:
                    continue
                argv = [sys.executable, "-c", code]
                sample(("sdk", case), _run(argv, env=children.env(None), cwd=here))
            for label, tree in trees.items():
                for case, code in PYRULA_CASES.items():
                    if "anthropic" in code and not HAVE_ANTHROPIC:
                        continue
                    argv = [sys.executable, "-c", code]
                    sample((label, case), _run(argv, env=children.env(tree), cwd=here))
                sample((label, WORKER_FIRST), _worker_first_run(children, tree))
                sample((label, WORKER_IDLE), _worker_idle(children, tree))
        foreign = {label: _foreign(children, tree) for label, tree in trees.items()}
        load_at_end = os.getloadavg()[0]
        counts = _callgrind(children, trees) if options.callgrind else {}

    openai_wall, openai_cpu = best[("sdk", "import openai (baseline)")]
    anthropic_wall, anthropic_cpu = best.get(("sdk", "import anthropic"), (0.0, 0.0))
    bytecode = "with the installation's bytecode only" if options.as_installed else "from .pyc"
    print(
        f"best of {options.rounds} fresh interpreters (Python {sys.version.split()[0]}, "
        f"{_versions()}; modules {bytecode}; load {load_at_start:.1f} at start, "
        f"{load_at_end:.1f} at end)"
    )
    print(f"{'case':46} {'code':>6} {'wall s':>7} {'cpu s':>6} {'x SDK (cpu)':>11}")
    for (label, case), (wall, cpu) in best.items():
        sdk_cpu = anthropic_cpu if "anthropic" in case else openai_cpu
        ratio = "" if label == "sdk" else f"{cpu / sdk_cpu:.2f}"
        print(f"{case:46} {label:>6} {wall:7.3f} {cpu:6.3f} {ratio:>11}")
    print(
        f"import openai alone: {openai_wall:.3f} s wall, {openai_cpu:.3f} s cpu"
        + (
            f"; import anthropic alone: {anthropic_wall:.3f} s wall, {anthropic_cpu:.3f} s cpu"
            if HAVE_ANTHROPIC
            else " (anthropic is not installed: its rows are skipped)"
        )
    )
    for label, found in foreign.items():
        print(
            f"other SDKs loaded by `import pyrula.agents.compat.openai` ({label}): "
            f"{', '.join(found) or 'none'}"
        )
    if counts:
        base = counts[("sdk", "import openai (baseline)")]
        print("\ninstructions from exec to the mark (callgrind; one child each, same run)")
        print(f"{'case':46} {'code':>6} {'instructions':>14} {'added':>13} {'x SDK':>6}")
        for (label, case), count in counts.items():
            added = "" if label == "sdk" else f"{(count - base) / 1e6:+,.1f}M"
            ratio = "" if label == "sdk" else f"{count / base:.3f}"
            print(f"{case:46} {label:>6} {count / 1e6:13,.1f}M {added:>13} {ratio:>6}")


if __name__ == "__main__":
    main()
