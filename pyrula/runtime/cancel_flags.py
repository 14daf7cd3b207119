"""A run's cancel flag: its key in the store's `flags` table, and the count of cancels this
process has asked for, by which a cancel check knows that none was asked here since its last
read (`Attempt.acheck_cancel`)."""

from __future__ import annotations

import threading


def cancel_key(run_id: str) -> bytes:
    return b"cancel:" + run_id.encode()


class CancelCount:
    """How many cancels this process has asked for, each counted once its write returned."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def bump(self) -> None:
        with self._lock:
            self.value += 1


# Bumped by `RunStore.request_cancel` and `terminate`; read by `Attempt.acheck_cancel`.
cancels_asked = CancelCount()
