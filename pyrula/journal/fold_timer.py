"""When a log's waiting facts are put in the store without a caller to do it: each log's fold
timer, and the one thread per process that fires them all (`append_log.BatchLog` starts its
timer on an append, and cancels it when a fold empties the log)."""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger("pyrula.journal")


class _Chores:
    """One daemon thread per process that calls functions once they are due: every log's fold
    timer, however many logs there are. (A thread per log cost each new log, so each worker
    start and each cassette block that logs, about 0.2 ms to start it.) A function runs
    without the lock; one that raises is logged, and the thread goes on."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due: list[tuple[float, int, Callable[[], None]]] = []  # a heap, soonest first
        self._order = itertools.count()  # ties keep the order they were asked in
        self._pid: int | None = None  # whose chores these are: a forked child has its own
        self._thread: threading.Thread | None = None

    def call_at(self, when: float, fn: Callable[[], None]) -> None:
        """Call `fn` on the thread once `time.monotonic()` reaches `when`."""
        with self._changed:
            if self._pid != os.getpid():
                self._pid, self._due, self._thread = os.getpid(), [], None
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="pyrula-chores", daemon=True)
                self._thread.start()
            heapq.heappush(self._due, (when, next(self._order), fn))
            if self._due[0][2] is fn:
                self._changed.notify()

    def _run(self) -> None:
        with self._changed:
            while True:
                left = self._due[0][0] - time.monotonic() if self._due else None
                if left is None or left > 0:
                    self._changed.wait(left)
                    continue
                fn = heapq.heappop(self._due)[2]
                self._changed.release()
                try:
                    fn()
                except Exception:
                    log.exception("a background chore of the journal failed")
                finally:
                    self._changed.acquire()


_CHORES = _Chores()


class FoldTimer:
    """Calls `fold` (on the process's chores thread) once `seconds()` have passed since
    `start`: what a log holds waits at most about that long to be seen by other processes. The
    owner calls `start` and `cancel` under its own lock, and `stop` when the log closes."""

    def __init__(self, fold: Callable[[], None], seconds: Callable[[], float]) -> None:
        self._fold = fold
        self._seconds = seconds
        self._due: float | None = None  # when to fold, while started
        self._stopped = False

    def start(self) -> None:
        """Start the timer unless it is running."""
        if self._due is not None or self._stopped:  # running: an append after an append
            return
        due = self._due = time.monotonic() + self._seconds()
        _CHORES.call_at(due, lambda: self._fire(due))

    def cancel(self) -> None:
        self._due = None

    def stop(self) -> None:
        """For good: a fold already due does not run."""
        self._stopped, self._due = True, None

    def _fire(self, due: float) -> None:
        if self._due != due:  # cancelled, or stopped, since (then maybe started again)
            return
        self._due = None  # fired: the next `start` starts it again
        self._fold()


__all__ = ["FoldTimer"]
