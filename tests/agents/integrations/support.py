"""What the integration tests share: a worker that SIGKILLs itself at seeded boundaries, and a
side-effect log.

`arrive` lets a worker process SIGKILL itself at seeded boundaries (before a request is sent or
a tool's effect runs); `effect` logs a side effect, durably, so a test can count it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def arrive(folder: str) -> None:
    """One live boundary reached: SIGKILL this process if the test seeded a death here."""
    arrivals = Path(folder, "arrivals")
    with arrivals.open("a") as log:
        log.write("x\n")
    count = len(arrivals.read_text().splitlines())
    marker = Path(folder, f"die-{count}")
    if marker.exists():
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)


def effect(folder: str, line: str) -> None:
    with Path(folder, "effects").open("a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())
