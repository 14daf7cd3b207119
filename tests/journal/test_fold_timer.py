"""Every log's fold timer: one thread of the process calls them, in the order they fall due."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from pyrula.journal.fold_timer import FoldTimer
from tests.fakes.clock import wait_until

WAIT = 10.0  # seconds to wait for a fold that must come (it comes in milliseconds)


def _chores_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "pyrula-chores"]


def _timer(seconds: float, calls: list[str], name: str, done: threading.Event | None = None):
    def fold() -> None:
        calls.append(name)
        if done is not None:
            done.set()

    return FoldTimer(fold, lambda: seconds)


def test_the_timers_of_many_logs_fold_each_once_on_one_thread():
    calls: list[str] = []
    last = threading.Event()
    timers = [_timer(0.01 * i, calls, f"log{i}") for i in range(5)]
    timers.append(_timer(0.06, calls, "last", last))
    for timer in timers:
        timer.start()
        timer.start()  # already running: not started again
    assert last.wait(WAIT)
    assert calls == ["log0", "log1", "log2", "log3", "log4", "last"]
    assert len(_chores_threads()) == 1


def test_a_cancelled_or_stopped_timer_does_not_fold_and_one_started_again_does():
    calls: list[str] = []
    cancelled, stopped = _timer(0.0, calls, "cancelled"), _timer(0.0, calls, "stopped")
    cancelled.start()
    cancelled.cancel()
    stopped.start()
    stopped.stop()
    stopped.start()  # a stopped timer stays stopped
    # Chores run in the order they fall due: once a later one has run, these had their turn.
    later = threading.Event()
    _timer(0.02, calls, "later", later).start()
    assert later.wait(WAIT)
    assert calls == ["later"]

    again = threading.Event()
    restarted = _timer(0.0, calls, "restarted", again)
    restarted.start()
    assert again.wait(WAIT)
    again.clear()
    restarted.start()  # fired, so it starts afresh
    assert again.wait(WAIT)
    assert calls == ["later", "restarted", "restarted"]


def test_a_fold_that_raises_is_logged_and_the_next_timers_still_fire(caplog):
    def broken() -> None:
        raise RuntimeError("disk on fire")

    FoldTimer(broken, lambda: 0.0).start()
    calls: list[str] = []
    done = threading.Event()
    _timer(0.01, calls, "after", done).start()
    assert done.wait(WAIT)
    assert calls == ["after"]
    assert "background chore of the journal failed" in caplog.text
    assert "disk on fire" in caplog.text


def _fold_in_child(result: multiprocessing.SimpleQueue) -> None:  # type: ignore[type-arg]
    done = threading.Event()
    _timer(0.0, [], "child", done).start()
    result.put((done.wait(WAIT), len(_chores_threads())))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork()")
def test_a_forked_child_folds_on_a_thread_of_its_own():
    done = threading.Event()
    _timer(0.0, [], "parent", done).start()  # the parent's thread is running
    assert done.wait(WAIT)
    context = multiprocessing.get_context("fork")
    result = context.SimpleQueue()
    child = context.Process(target=_fold_in_child, args=(result,))
    child.start()
    child.join(WAIT)
    assert child.exitcode == 0
    assert result.get() == (True, 1)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_chore_that_ends_the_thread_leaves_the_next_timers_a_new_one():
    def ends_the_thread() -> None:
        raise SystemExit  # a BaseException: not logged and passed over, it ends the thread

    FoldTimer(ends_the_thread, lambda: 0.0).start()
    wait_until(lambda: not _chores_threads(), "the chores thread to end")
    calls: list[str] = []
    done = threading.Event()
    _timer(0.0, calls, "after", done).start()
    assert done.wait(WAIT)
    assert calls == ["after"]
