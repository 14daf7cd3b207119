"""Model calls still open when an attempt ends: each is metered once, deterministically.

A stream the body never finished (parked or returned while reading it, or dropped without
`close()`) was sent and paid for: its reply had begun. When the attempt ends, before its closing
event, each such call is metered as `estimated` at its reservation, and its sink is closed:
whatever the stream does later (read on, closed, collected) writes nothing more. A call whose
reply had not begun (a sync call still waiting on a thread the body left running) is not
metered then; if its reply lands later it is logged as `model_spend_after_terminal` instead of
being written after the run's terminal event. A call that never got a reply at all (refused,
connection failed) is the call frame's business (`RunSession.end_call`), not this module's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pyrula.journal.recorder import Reply
from pyrula.transport.core import Offload, Sink

log = logging.getLogger("pyrula.runtime")

# What an attempt had of a reply it stopped waiting for: nothing it could read.
_NOTHING_ARRIVED = Reply(status=200, headers=[], frames=[], elapsed_ms=0.0, streamed=True)


class OpenCalls:
    """The live calls of one attempt whose replies have not ended yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[TrackedSink] = set()
        self.closed = False

    def track(
        self,
        sink: Sink,
        describe: Callable[[Reply], dict[str, object]],
        offload: Offload | None = None,
    ) -> TrackedSink:
        """`sink`, seen through a tracker; `describe(reply)` gives the model and token counts
        a late reply is logged with; `offload`, where an async tee runs its calls."""
        tracked = TrackedSink(self, sink, describe)
        tracked.offload = offload
        with self._lock:
            self._open.add(tracked)
        return tracked

    def close(self, *, meter: bool) -> int:
        """End the attempt's calls: with `meter`, each still open is metered once as an
        estimate (its sink's `abandon` with nothing arrived). Returns how many were open."""
        with self._lock:
            still_open = list(self._open)
            self._open.clear()
            self.closed = True
        for tracked in still_open:
            metered = meter and tracked.begun
            tracked.cut_off = "metered as an estimate" if metered else "not counted"
            if metered:
                tracked.sink.abandon(_NOTHING_ARRIVED)
        return len(still_open)

    def first_end(self, tracked: TrackedSink) -> bool:
        """Whether this is the first time `tracked`'s reply ends (and the attempt still runs)."""
        with self._lock:
            if tracked in self._open:
                self._open.discard(tracked)
                return True
            return False


class TrackedSink:
    """A `Sink` whose first ending is reported to its `OpenCalls`."""

    __slots__ = ("_calls", "_describe", "begun", "cut_off", "offload", "sink")

    def __init__(
        self, calls: OpenCalls, sink: Sink, describe: Callable[[Reply], dict[str, object]]
    ) -> None:
        self._calls = calls
        self._describe = describe
        self.sink = sink
        self.begun = False
        self.cut_off: str | None = None  # how the attempt's end settled it, if it did
        self.offload: Offload | None = None  # how an async tee calls it (`transport.core`)

    @property
    def cap(self) -> int:
        return self.sink.cap

    def sent(self) -> None:
        self.sink.sent()

    def began(self) -> None:
        self.begun = True
        self.sink.began()

    def complete(self, reply: Reply) -> None:
        if self._calls.first_end(self) or self.cut_off is None:
            self.sink.complete(reply)  # again for bytes after the end: the sink amends
        else:
            self._late(reply)

    def abandon(self, reply: Reply) -> None:
        if self._calls.first_end(self):
            self.sink.abandon(reply)

    def truncated(self, reply: Reply) -> None:
        if self._calls.first_end(self):
            self.sink.truncated(reply)

    def _late(self, reply: Reply) -> None:
        if self.cut_off is not None and self.cut_off.endswith("reported"):
            return  # bytes after the end of a reply already reported
        described = self._describe(reply)
        log.warning(
            "model_spend_after_terminal: a reply from %s (%s input, %s output tokens) arrived "
            "after its run's attempt ended; nothing more is written (the call was %s)",
            described.get("model"),
            described.get("input_tokens"),
            described.get("output_tokens"),
            self.cut_off,
            extra={"event": "model_spend_after_terminal", "usage": described},
        )
        self.cut_off = f"{self.cut_off}; already reported"
