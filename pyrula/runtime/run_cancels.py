"""A run's cancel flag in the store: asking a run to stop, ending one at once, and reading the
flag (the key, and the count of cancels this process asked, are `cancel_flags.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from pyrula.journal.group_read import group_read
from pyrula.journal.store import Txn
from pyrula.runtime.cancel_flags import cancel_key, cancels_asked
from pyrula.runtime.leases import lease_key
from pyrula.runtime.records import CANCELLED, PARKED, TERMINAL, RunRecord, dump_json
from pyrula.runtime.run_events import RunEvents


class RunCancels(RunEvents):
    """Setting and reading runs' cancel flags (the store's `flags` table)."""

    def request_cancel(self, run_id: str) -> RunRecord:
        """Mark a run cancelled-on-request; a parked run is woken so it can end."""

        def write(txn: Txn) -> RunRecord:
            run = self._record(txn, run_id)
            if run.status in TERMINAL:
                return run
            run.cancel_requested = True
            if run.status == PARKED:
                run.wake_at = 0.0
            run.updated_at = time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.put(cancel_key(run_id), b"1", db=self._flags)
            txn.wake()  # a cancel is requested
            return run

        return self._write_cancel(run_id, write)

    def terminate(self, run_id: str) -> RunRecord:
        """End a run now, as cancelled, whoever runs it: removing its lease fences the attempt
        still executing out of every further write."""

        def write(txn: Txn) -> RunRecord:
            run = self._record(txn, run_id)
            if run.status in TERMINAL:
                return run
            self.append_in(txn, run_id, "run:cancelled", {"terminated": True})
            run.status, run.lease, run.cancel_requested = CANCELLED, None, True
            run.updated_at = time.time()
            txn.put(run_id.encode(), dump_json(run.to_json()), db=self._runs)
            txn.put(cancel_key(run_id), b"1", db=self._flags)
            txn.delete(lease_key(run_id), db=self._flags)
            txn.delete(run_id.encode(), db=self._queue)
            txn.wake()  # a parent may wait on it
            return run

        return self._write_cancel(run_id, write)

    def _write_cancel(self, run_id: str, write: Callable[[Txn], RunRecord]) -> RunRecord:
        """Commit `write` (it sets the run's cancel flag), then count a cancel asked here."""
        try:
            return self.store.write(write, scope=(run_id,))
        finally:
            cancels_asked.bump()

    def cancel_requested(self, run_id: str) -> bool:
        with self.store.read() as txn:
            return txn.get(cancel_key(run_id), db=self._flags) is not None

    async def acancel_requested(self, run_id: str) -> bool:
        """`cancel_requested` from the event loop: the worker's runs share one read."""
        return await group_read(self.store).get(cancel_key(run_id), db=self._flags) is not None
