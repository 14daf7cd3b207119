"""Withheld values: what a run's events leave out below the `io` capture level.

Below `io`, a step's result, a tool's return and a failure's message stay out of the events that
`runs show`, exports and the UI print; replay still needs them, so each is kept here, under the
run and the fact's position (`"run"` for the run's own outcome), written in the same commit as
its event and purged with the run. Only the runtime reads them.
"""

from __future__ import annotations

import json
from typing import Any

from pyrula.errors import RunNotFound
from pyrula.journal.store import Store, Txn
from pyrula.runtime.records import dump_json


def withheld_key(run_id: str, position: str) -> bytes:
    return run_id.encode() + b"\x00" + position.encode()


class WithheldValues:
    """Reading and writing a run's withheld values (the store's `withheld` table)."""

    store: Store
    _withheld: Any

    def withheld(self, run_id: str, position: str) -> dict[str, Any]:
        """What the fact at `position` (or `"run"`, the run's outcome) kept out of its event
        below the `io` capture level: the result or full error its replay needs."""
        value = None
        if self._withheld is not None:  # a store opened read-only before it had the table
            with self.store.read() as txn:
                value = txn.get(withheld_key(run_id, position), db=self._withheld)
        if value is None:
            raise RunNotFound(f"run {run_id} has no withheld value at {position!r}")
        data: dict[str, Any] = json.loads(bytes(value))
        return data

    def _put_withheld(self, txn: Txn, run_id: str, position: str, value: dict[str, Any]) -> None:
        txn.put(withheld_key(run_id, position), dump_json(value), db=self._withheld)
