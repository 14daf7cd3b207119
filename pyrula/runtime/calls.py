"""What a drop-in (or any integration) sees of the runtime: the current run and its call frames.

This is the one module of `pyrula.runtime` that `pyrula.agents.compat` and future integrations
import, besides the public `pyrula.runtime` package; the rest of the runtime is its own.

The current run is one `RunContext` in one context variable: the attempt executing (if any),
the replay scope a durable operation takes its position in, the SDK call being framed, and
whether the journal is bypassed. A task or thread started with the run's context sees the same
run; a change made here (entering a scope, a call frame, a bypass) is undone on leaving it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pyrula.errors import RecordRefused
from pyrula.runtime.limits import Reservation, estimate_tokens
from pyrula.runtime.media import billable_request_bytes
from pyrula.runtime.positions import MAIN, Scope
from pyrula.runtime.ratelimit import BEDROCK, GEMINI, LLMRate, Slot

if TYPE_CHECKING:  # the transport stack loads with the first model call, not with a drop-in
    from pyrula.fingerprints import Canonical, RequestParts
    from pyrula.journal.exchanges import ExchangeRecord
    from pyrula.journal.recorder import Reply
    from pyrula.runtime.attempt import Attempt
    from pyrula.transport.core import Session

__all__ = [
    "BEDROCK",
    "ERROR_HEADERS",
    "GEMINI",
    "CallFrame",
    "HeldError",
    "LLMRate",
    "Outcomes",
    "ReplayedFailure",
    "RunContext",
    "Scope",
    "SentCall",
    "Slot",
    "acall_frame",
    "areplays",
    "billable_request_bytes",
    "bypassed",
    "bypassing",
    "call_frame",
    "current_run",
    "estimate_tokens",
    "in_call",
    "in_scope",
    "passed_through",
    "replays",
    "runs_bound",
]

T = TypeVar("T")

# What a journaled provider error keeps of its reply: these headers, and a body up to a cap.
ERROR_HEADERS = frozenset(
    {"retry-after", "retry-after-ms", "x-should-retry", "x-request-id", "request-id"}
)


# -- one SDK-level call ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SentCall:
    """A request of the call sent live and not yet answered, and what it reserved."""

    parts: RequestParts
    canonical: Canonical
    scope: Scope
    reservation: Reservation


@dataclass(frozen=True, slots=True)
class HeldError:
    """An error reply the SDK may still retry: journaled by `commit` only if it gives up."""

    commit: Callable[[Reply], None]
    reply: Reply
    reservation: Reservation


@dataclass(slots=True)
class CallFrame:
    """One SDK-level model call, set by a drop-in around it (see `call_frame`).

    Every HTTP attempt the SDK makes for the call (its own retries) shares one position, and
    only the call's outcome is journaled there: a success as it arrives, an error reply only
    once the SDK has given up on it (`RunSession.end_call`), since the SDK may still retry it.
    """

    position: str | None = None
    key: bytes | None = None
    digest: str | None = None  # the fingerprint of the request at `position`
    sent: SentCall | None = None
    held: HeldError | None = None


class ReplayedFailure(BaseException):
    """Raised from the transport, in a call frame, when the call's journaled outcome is an error:
    the drop-in around the call turns it into the SDK's own exception, with nothing sent.

    A BaseException, so the SDK's retry loop (which catches Exception) lets it through.
    """

    def __init__(self, record: ExchangeRecord, body: bytes) -> None:
        self.record = record
        self.body = body
        super().__init__(f"journaled failure at status {record.status}")


# -- the current run ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunContext:
    """The current run, as this task or thread sees it."""

    attempt: Attempt | None = None
    scope: Scope = MAIN
    call: CallFrame | None = None
    # Set around a call a drop-in passes through unjournaled (embeddings, files, ...): its
    # requests take no journal position and are not metered.
    bypassed: bool = False

    @property
    def in_run(self) -> bool:
        """Whether a run's body is executing here."""
        return self.attempt is not None

    @property
    def is_agent(self) -> bool:
        return self.attempt is not None and self.attempt.is_agent

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the run's body runs on (a sync caller waits for a slot through it)."""
        return self.attempt.loop if self.attempt is not None else None

    @property
    def session(self) -> Session | None:
        """The run's transport session, which plans each of its model calls."""
        return self.attempt.session if self.attempt is not None else None

    def refuse_loop_thread(self) -> None:
        """Raise `UnjournaledSurface` when a sync model call is made on the run's loop thread."""
        if self.attempt is not None:
            self.attempt.refuse_loop_thread()


_NONE = RunContext()
_current: ContextVar[RunContext] = ContextVar("pyrula_run", default=_NONE)


def current_run() -> RunContext:
    """The run this task or thread belongs to (`in_run` is False outside any run)."""
    return _current.get()


class _Changed:
    """The current run changed for a block: a class, not a generator (a step enters one)."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: RunContext) -> None:
        self._context = context

    def __enter__(self) -> RunContext:
        self._token = _current.set(self._context)
        return self._context

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def _derived(**changes: Any) -> RunContext:
    """The current run with `changes`: each field named (not `dataclasses.replace`, which
    looks them up on every call; a step derives one)."""
    now = _current.get()
    return RunContext(
        changes.get("attempt", now.attempt),
        changes.get("scope", now.scope),
        changes.get("call", now.call),
        changes.get("bypassed", now.bypassed),
    )


def _changed(**changes: Any) -> _Changed:
    return _Changed(_derived(**changes))


@contextlib.contextmanager
def running(attempt: Attempt) -> Iterator[RunContext]:
    """The body of `attempt`'s run executes inside this (the worker enters it)."""
    with _changed(attempt=attempt) as context:
        _bind_run(+1)
        try:
            yield context
        finally:
            _bind_run(-1)


def in_scope(scope: Scope) -> contextlib.AbstractContextManager[RunContext]:
    """Durable operations inside take their positions in `scope` (a step, a tool, a thread)."""
    return _changed(scope=scope)


def enter_scope(scope: Scope) -> None:
    """Set the scope of a context copied for a thread of the run, for as long as it lives."""
    _current.set(_derived(scope=scope))


def bypassed() -> contextlib.AbstractContextManager[RunContext]:
    """Requests sent inside go past the journal: no position, not metered."""
    return _changed(bypassed=True)


async def bypassing(awaitable: Awaitable[T]) -> T:
    """Await `awaitable` with the journal bypassed."""
    with bypassed():
        return await awaitable


def passed_through(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call `fn` with the journal bypassed (and await it so, when it returns a coroutine)."""
    with bypassed():
        result = fn(*args, **kwargs)
    if inspect.iscoroutine(result):
        return bypassing(result)
    return result


# -- framing a call ----------------------------------------------------------------------------


class Outcomes(Protocol):
    """How one SDK reports a call's outcome: what a journaled failure replays as, and which
    exceptions mean the request had left (so the failure is the call's outcome)."""

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException: ...

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None: ...


def in_call(frame: CallFrame) -> contextlib.AbstractContextManager[RunContext]:
    """Requests sent inside are `frame`'s call (what `call_frame` enters, without its outcomes)."""
    return _changed(call=frame)


@contextlib.contextmanager
def call_frame(outcomes: Outcomes, frame: CallFrame | None = None) -> Iterator[CallFrame]:
    """One journaled SDK call: its retries share a position, and an error it ends in is
    journaled, then raised again on replay without sending anything. Pass `frame` to enter the
    same call again (a stream whose requests go out as it is iterated)."""
    frame = frame if frame is not None else CallFrame()
    with in_call(frame):
        try:
            yield frame
        except BaseException as exc:
            attempt = _given_up(outcomes, exc)
            if attempt is not None:
                attempt.session.end_call(frame, outcomes.sent_failure(exc))
            raise


@contextlib.asynccontextmanager
async def acall_frame(
    outcomes: Outcomes, frame: CallFrame | None = None
) -> AsyncIterator[CallFrame]:
    """`call_frame` for a call of an async client, made on the run's event loop: the outcome
    it journals when the SDK gives up is written without blocking the loop
    (`RunSession.aend_call`: on a store thread where the journal is on a server)."""
    frame = frame if frame is not None else CallFrame()
    with in_call(frame):
        try:
            yield frame
        except BaseException as exc:
            attempt = _given_up(outcomes, exc)
            if attempt is not None:
                await attempt.session.aend_call(frame, outcomes.sent_failure(exc))
            raise


def _given_up(outcomes: Outcomes, exc: BaseException) -> Any:
    """The SDK gave up on a call with `exc`: the attempt that journals it as the call's outcome
    (a provider error, or a transport failure after the request went out; a failure before
    sending, say a rejected argument or no connection, is not), None outside a run. A journaled
    failure replayed is raised instead as the SDK's own error, a reply the journal refused as
    the error it carries."""
    if isinstance(exc, ReplayedFailure):
        raise outcomes.rebuilt(exc) from None
    if isinstance(exc, RecordRefused):
        raise exc.error from None
    return current_run().attempt


def replays(frame: CallFrame) -> bool:
    """Whether the call of `frame` will be answered from the journal, sending nothing (so it
    needs no rate-limit slot); it claims the call's position now (see `RunSession.replays`)."""
    attempt = current_run().attempt
    return attempt is not None and attempt.session.replays(frame)


async def areplays(frame: CallFrame) -> bool:
    """`replays` from the run's event loop: the journal's read does not block the loop."""
    attempt = current_run().attempt
    return attempt is not None and await attempt.session.areplays(frame)


# -- runs executing in this process ------------------------------------------------------------

# How many run bodies are executing in this process: a drop-in called with no run in its context
# while one is bound warns that its thread lost the run's context.
_bound_runs = 0
_bound_lock = threading.Lock()


def _bind_run(delta: int) -> None:
    global _bound_runs
    with _bound_lock:
        _bound_runs += delta


def runs_bound() -> bool:
    """Whether a run's body is executing anywhere in this process."""
    return _bound_runs > 0
