"""Start-up cost: importing a drop-in, and a worker's start, against importing the SDK alone.

Each figure is the best of ROUNDS fresh interpreters, as wall-clock and as the child's CPU time
(user + system, which a loaded machine disturbs far less than wall time). The baseline is the
same interpreter importing only the SDK, measured in the same run and interleaved with the
others, so the machine's load hits all alike; the `x SDK` column is each case over `import
openai` (over `import anthropic` for the anthropic rows).

With `--before REF` every pyrula case is also measured on the code of that git revision
(`git archive`, imported ahead of the installed package through PYTHONPATH), interleaved with
the current code, and the table prints both:

    python benchmarks/bench_import.py [--rounds 7] [--before 71c6b8c]

`python -X importtime -c "import pyrula.agents.compat.openai" 2>&1 | sort -t'|' -k2 -n | tail`
shows where the rest goes, module by module.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import before_tree

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
WORKER = "pyrula worker start (openai app)"
# What an openai-only import must not load: the other providers' SDKs.
FOREIGN = ("anthropic", "google.genai", "boto3", "botocore")


def _run(argv: list[str], *, env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process, started in `cwd` (never in a checkout,
    whose `pyrula/` folder would shadow the revision under test)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, env=env, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _env(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    return env


def _worker_start(folder: Path, i: int, tree: Path | None) -> tuple[float, float]:
    """`pyrula worker` importing an app that uses openai only, on an existing store, to exit."""
    store = folder / f"store{i}{'b' if tree else 'a'}"
    app = folder / f"bench_app_{i}{'b' if tree else 'a'}.py"
    app.write_text("from pyrula.agents.compat import AsyncOpenAI\n")
    code = f"from pyrula.journal import Store; Store({str(store)!r}).close()"
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(tree), cwd=folder)
    argv = [sys.executable, "-m", "pyrula.cli.app", "worker", "--import", app.stem,
            "--store", str(store), "--until-idle", "--quiet"]
    return _run(argv, env=_env(tree), cwd=str(folder))


def _foreign(tree: Path | None, folder: Path) -> list[str]:
    code = (
        "import sys, pyrula.agents.compat.openai; "
        f"print(' '.join(m for m in {FOREIGN!r} if m in sys.modules))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env=_env(tree),
        cwd=folder,
        capture_output=True,
        text=True,
    )
    return found.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--before", metavar="REF", help="also measure this git revision")
    options = parser.parse_args()
    best: dict[tuple[str, str], tuple[float, float]] = {}

    def keep(key: tuple[str, str], sample: tuple[float, float]) -> None:
        wall, cpu = best.get(key, (float("inf"), float("inf")))
        best[key] = (min(wall, sample[0]), min(cpu, sample[1]))

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        trees: dict[str, Path | None] = {"now": None}
        if options.before:
            trees = {"before": before_tree(options.before, folder), "now": None}
        for i in range(options.rounds):
            for case, code in SDK_CASES.items():
                keep(("sdk", case), _run([sys.executable, "-c", code], env=_env(None), cwd=name))
            for label, tree in trees.items():
                for case, code in PYRULA_CASES.items():
                    argv = [sys.executable, "-c", code]
                    keep((label, case), _run(argv, env=_env(tree), cwd=name))
                keep((label, WORKER), _worker_start(folder, i, tree))
        foreign = {label: _foreign(tree, folder) for label, tree in trees.items()}

    openai_wall, openai_cpu = best[("sdk", "import openai (baseline)")]
    anthropic_wall, anthropic_cpu = best[("sdk", "import anthropic")]
    print(f"best of {options.rounds} fresh interpreters (Python {sys.version.split()[0]}, "
          f"load {os.getloadavg()[0]:.1f})")
    print(f"{'case':46} {'code':>6} {'wall s':>7} {'cpu s':>6} {'x SDK (cpu)':>11}")
    for (label, case), (wall, cpu) in best.items():
        sdk_cpu = anthropic_cpu if "anthropic" in case else openai_cpu
        ratio = "" if label == "sdk" else f"{cpu / sdk_cpu:.2f}"
        print(f"{case:46} {label:>6} {wall:7.3f} {cpu:6.3f} {ratio:>11}")
    print(f"import openai alone: {openai_wall:.3f} s wall, {openai_cpu:.3f} s cpu; "
          f"import anthropic alone: {anthropic_wall:.3f} s wall, {anthropic_cpu:.3f} s cpu")
    for label, found in foreign.items():
        print(f"other SDKs loaded by `import pyrula.agents.compat.openai` ({label}): "
              f"{', '.join(found) or 'none'}")


if __name__ == "__main__":
    main()
