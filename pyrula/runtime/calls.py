"""What a drop-in (or any integration) sees of the runtime: the current run and its call frames.

This is the one module of `pyrula.runtime` that `pyrula.agents.compat` and future integrations
import, besides the public `pyrula.runtime` package; the rest of the runtime is its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

from pyrula.fingerprints import Canonical, RequestParts
from pyrula.journal.exchanges import ExchangeRecord
from pyrula.journal.recorder import Reply
from pyrula.runtime.limits import Reservation
from pyrula.runtime.positions import MAIN, Scope

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt

current_scope: ContextVar[Scope] = ContextVar("pyrula_scope", default=MAIN)
current_attempt: ContextVar[Attempt | None] = ContextVar("pyrula_attempt", default=None)
# Set around a call a drop-in passes through unjournaled (embeddings, files, ...): its requests
# take no journal position and are not metered.
journal_bypass: ContextVar[bool] = ContextVar("pyrula_journal_bypass", default=False)

# What a journaled provider error keeps of its reply: these headers, and a body up to the cap.
ERROR_HEADERS = frozenset(
    {"retry-after", "retry-after-ms", "x-should-retry", "x-request-id", "request-id"}
)


class CallFrame:
    """One SDK-level model call, set by a drop-in around it (see `current_call`).

    Every HTTP attempt the SDK makes for the call (its own retries) shares one position, and
    only the call's outcome is journaled there: a success as it arrives, an error reply only
    once the SDK has given up on it (`RunSession.end_call`), since the SDK may still retry it.
    """

    __slots__ = ("digest", "held", "key", "position", "sent")

    def __init__(self) -> None:
        self.position: str | None = None
        self.key: bytes | None = None
        self.digest: str | None = None  # the fingerprint of the request at `position`
        # The last attempt sent live and not yet answered: (parts, canonical, scope, reservation).
        self.sent: tuple[RequestParts, Canonical, Scope, Reservation] | None = None
        # An error reply the SDK may still retry: (commit, reply, reservation).
        self.held: tuple[Callable[[Reply], None], Reply, Reservation] | None = None


current_call: ContextVar[CallFrame | None] = ContextVar("pyrula_call", default=None)


class ReplayedFailure(BaseException):
    """Raised from the transport, in a call frame, when the call's journaled outcome is an error:
    the drop-in around the call turns it into the SDK's own exception, with nothing sent.

    A BaseException, so the SDK's retry loop (which catches Exception) lets it through.
    """

    def __init__(self, record: ExchangeRecord, body: bytes) -> None:
        self.record = record
        self.body = body
        super().__init__(f"journaled failure at status {record.status}")


# How many run bodies are executing in this process: a drop-in called with no run in its context
# while one is bound warns that its thread lost the run's context.
_bound_runs = 0
_bound_lock = threading.Lock()


def bind_run(delta: int) -> None:
    global _bound_runs
    with _bound_lock:
        _bound_runs += delta


def runs_bound() -> bool:
    return _bound_runs > 0
