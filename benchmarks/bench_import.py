"""Start-up cost: importing a drop-in, and a worker's start, against importing the SDK alone.

Each figure is the best of ROUNDS fresh interpreters (`python -X importtime` is not used: it
slows imports down). The baseline is the same interpreter importing only the SDK, measured in
the same run and interleaved with the others, so the machine's load hits all alike.

    python benchmarks/bench_import.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

CASES = {
    "python -c pass (floor)": "pass",
    "import openai (baseline)": "import openai",
    "import pyrula.agents.compat.openai": "import pyrula.agents.compat.openai",
    "import anthropic": "import anthropic",
    "import pyrula.agents.compat.anthropic": "import pyrula.agents.compat.anthropic",
}


def _seconds(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def _worker_start(store: str) -> float:
    """`pyrula worker` importing an app that uses openai only, on an empty store, to exit."""
    app = f"{store}_app"
    with open(f"{app}.py", "w") as module:
        module.write("from pyrula.agents.compat import AsyncOpenAI\n")
    subprocess.run(  # the store exists before the timed start, as a worker's would
        [sys.executable, "-c", f"from pyrula.journal import Store; Store({store!r}).close()"],
        check=True,
    )
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pyrula.cli.app",
            "worker",
            "--import",
            app.rsplit("/", 1)[1],
            "--store",
            store,
            "--until-idle",
        ],
        check=True,
        cwd=store.rsplit("/", 1)[0],
        capture_output=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(rounds):
            for name, code in CASES.items():
                best[name] = min(best.get(name, float("inf")), _seconds(code))
            seconds = _worker_start(f"{folder}/store{i}")
            best["pyrula worker start (openai app)"] = min(
                best.get("pyrula worker start (openai app)", float("inf")), seconds
            )
    floor, baseline = best["python -c pass (floor)"], best["import openai (baseline)"]
    print(f"best of {rounds} fresh interpreters ({sys.version.split()[0]})")
    print(f"{'case':44} {'seconds':>8} {'over SDK':>9}")
    for name, seconds in best.items():
        sdk = best["import anthropic"] if "anthropic" in name else baseline
        extra = (
            ""
            if "floor" in name or "baseline" in name or name == "import anthropic"
            else (f"{seconds - sdk:+.3f}")
        )
        print(f"{name:44} {seconds:8.3f} {extra:>9}")
    print(f"interpreter floor {floor:.3f} s; pyrula's own share is the 'over SDK' column")


if __name__ == "__main__":
    main()
