"""Positions: where in a run each durable operation happens.

A run's body re-executes from the top on every attempt. Each durable operation takes the next
position in its replay scope (`main`, `thread:<n>`, `map:<n>:<i>`, or a step's id); a position
with a journaled outcome returns that outcome instead of doing the work again. Model calls are
journaled exchanges under `(run, scope, index)` (`pyrula.journal.keys.run_key`).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scope:
    """Where in the run a durable operation happens."""

    name: str = "main"
    within: str = "run"  # "run", "step" or "tool"
    unit: str | None = None  # the enclosing step or tool id
    # Who pays for model calls here: "step", "tool", or "run" for a tool called straight from
    # the body (no step to charge). Only the `llm:done` event reads it.
    charged_to: str = "run"


MAIN = Scope()


class Positions:
    """The positions one attempt has handed out, per replay scope and kind of operation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: dict[tuple[str, str], int] = defaultdict(int)

    def next(self, scope: str, kind: str) -> str:
        """The next position of `kind` in `scope`: `main/step0`, `main/llm3`, ..."""
        with self._lock:
            index = self._taken[(scope, kind)]
            self._taken[(scope, kind)] = index + 1
        return f"{scope}/{kind}{index}"
