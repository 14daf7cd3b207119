"""One attempt at running a run's body: positions, replay of journaled facts, model calls.

A run's body re-executes from the top on every attempt. Each durable operation takes the next
position in its replay scope (`main`, `thread:<n>`, `map:<n>:<i>`, or a step's id); a position
with a journaled outcome returns that outcome instead of doing the work again. Model calls are
journaled exchanges under `(run, scope, index)`, checked by request fingerprint.
"""

from __future__ import annotations

import asyncio
import json
import struct
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import lmdb

from pyrula.errors import (
    BudgetExceeded,
    DurableInvocationCancelled,
    PayloadTooLarge,
    ProviderStreamTruncated,
    RecordRefused,
    ReplayInputChanged,
    UnjournaledSurface,
)
from pyrula.fingerprints import Canonical, RequestParts, diff, surfaces
from pyrula.journal import scrub
from pyrula.journal.exchanges import ExchangeRecord, Exchanges
from pyrula.journal.recorder import Reply, record_exchange
from pyrula.replies import openai_chat
from pyrula.runtime.journal import Event, Lease, RunJournal, RunRecord
from pyrula.runtime.limits import AgentLimits, Budget, Reservation
from pyrula.runtime.media import billable_request_bytes
from pyrula.runtime.metering import (
    arrived_output_tokens,
    canonical_model,
    deployment,
    prices,
    requested_model,
    usage_from_reply,
)
from pyrula.transport.core import Live, Plan, Replay
from pyrula.transport.framing import completion_for

_U32 = struct.Struct(">I")
RUN_PREFIX = b"r\x00"


@dataclass(frozen=True, slots=True)
class Scope:
    """Where in the run a durable operation happens."""

    name: str = "main"
    within: str = "run"  # "run", "step" or "tool"
    unit: str | None = None  # the enclosing step or tool id


_MAIN = Scope()
current_scope: ContextVar[Scope] = ContextVar("pyrula_scope", default=_MAIN)
current_attempt: ContextVar[Attempt | None] = ContextVar("pyrula_attempt", default=None)
# Set around a call a drop-in passes through unjournaled (embeddings, files, ...): its requests
# take no journal position and are not metered.
journal_bypass: ContextVar[bool] = ContextVar("pyrula_journal_bypass", default=False)

# What a journaled provider error keeps of its reply: these headers, and a body up to the cap.
ERROR_HEADERS = frozenset(
    {"retry-after", "retry-after-ms", "x-should-retry", "x-request-id", "request-id"}
)
ERROR_BODY_CAP = 16 * 1024


class CallFrame:
    """One SDK-level model call, set by a drop-in around it (see `current_call`).

    Every HTTP attempt the SDK makes for the call (its own retries) shares one position, and
    only the call's outcome is journaled there: a success as it arrives, an error reply only
    once the SDK has given up on it (`Attempt.end_call`), since the SDK may still retry it.
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


_TRUNCATED = ProviderStreamTruncated.__name__


def _cut_short(frames: Iterator[bytes], message: str) -> Iterator[bytes]:
    """A journaled truncated stream: what arrived, then the same error, as the reader reaches
    its end."""
    yield from frames
    raise ProviderStreamTruncated(message)


def _finished_but_usage(canonical: Canonical, reply: Reply) -> bool:
    """An OpenAI chat stream the caller stopped reading after every choice's `finish_reason`
    chunk, before the usage chunk it asked for: the answer is whole, only its usage is missing."""
    if canonical.surface != surfaces.OPENAI_CHAT or not reply.streamed or not reply.decoded:
        return False
    if not openai_chat.wants_usage(canonical.meta):
        return False
    content_type = next((v for k, v in reply.headers if k.lower() == "content-type"), "")
    meta = {**canonical.meta, "stream_options": None}
    completion = completion_for(canonical.surface, content_type, canonical.compared, meta)
    for chunk in reply.frames:
        completion.feed(chunk)
    return completion.complete


def _on_a_cloud(canonical: Canonical) -> bool:
    return canonical.surface == surfaces.BEDROCK_CONVERSE or canonical.meta.get("platform") in (
        "bedrock",
        "vertex",
    )


# A replayed reply was not served by the provider for this request, so it names no request id:
# the SDKs then report `request_id` as None, not an id whose logs hold some other attempt.
_REQUEST_IDS = frozenset({"request-id", "x-request-id"})


def _not_a_served_request(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in _REQUEST_IDS]


def exchange_key(run_id: str, scope: str, index: int) -> bytes:
    return RUN_PREFIX + run_id.encode() + b"\x00" + scope.encode() + b"\x00" + _U32.pack(index)


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


class Park(BaseException):
    """Unwinds the body when the run must wait (an interrupt, a long sleep, a signal)."""

    def __init__(self, reason: str, payload: dict[str, Any], wake_at: float | None = None):
        self.reason = reason
        self.payload = payload
        self.wake_at = wake_at
        super().__init__(reason)


class Attempt:
    """The state of one attempt, and the transport `Session` of the run while it executes."""

    def __init__(
        self,
        journal: RunJournal,
        run: RunRecord,
        lease: Lease,
        *,
        limits: AgentLimits | None = None,
        is_agent: bool = False,
    ) -> None:
        self.journal = journal
        self.exchanges = Exchanges(journal.store)
        self.run = run
        self.lease = lease
        self.is_agent = is_agent
        self.budget = Budget(limits)
        self.loop_thread = threading.get_ident()
        try:  # the worker builds an attempt on the loop its body runs on
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._lock = threading.Lock()
        self._positions: dict[tuple[str, str], int] = defaultdict(int)
        self.facts: dict[str, Event] = {}
        self.open_children: dict[str, str] = {}
        self.by_type: dict[str, list[Event]] = defaultdict(list)
        for event in journal.events(run.id):
            self._learn(event)

    def _learn(self, event: Event) -> None:
        self.by_type[event.type].append(event)
        position = event.payload.get("position")
        if isinstance(position, str):
            self.facts[position] = event
        if event.type == "llm:done":
            self.budget.replayed(event.payload)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the run's body runs on: a sync caller on a thread of the run waits
        for a rate-limit slot through it (see `pyrula.runtime.ratelimit`)."""
        return self._loop

    # -- positions and facts -------------------------------------------------------------------

    def next_position(self, kind: str) -> str:
        scope = current_scope.get()
        with self._lock:
            index = self._positions[(scope.name, kind)]
            self._positions[(scope.name, kind)] = index + 1
        return f"{scope.name}/{kind}{index}"

    def write(self, kind: str, payload: dict[str, Any]) -> Event:
        """Journal a fact of this attempt (fenced by its lease) and remember it."""
        event = self.journal.append(self.run.id, self.lease, kind, payload)
        with self._lock:
            self._learn(event)
        return event

    def check_cancel(self) -> None:
        if self.journal.cancel_requested(self.run.id):
            raise DurableInvocationCancelled(f"run {self.run.id} was cancelled")

    # -- model calls: the run as a transport session -----------------------------------------

    def refuse_loop_thread(self) -> None:
        """A sync model call must not run on the run's own loop thread: it would block the run,
        and its reply could not be journaled in order."""
        if threading.get_ident() == self.loop_thread:
            raise UnjournaledSurface(
                "a sync model client was called on the run's own event loop thread, where it "
                "would block the run and cannot be journaled; call it through "
                "`await ctx.to_thread(fn)` (or `asyncio.to_thread`), or use the async client"
            )

    def plan(self, parts: RequestParts, canonical: Canonical, *, blocking: bool = False) -> Plan:
        if blocking:
            self.refuse_loop_thread()
        self.check_cancel()
        if journal_bypass.get():
            return Live(None)
        scope = current_scope.get()
        if scope.within != "run":
            # Inside a step or tool the unit's result is what is durable: meter, do not journal.
            reservation = self.budget.reserve(
                billable_request_bytes(parts.body, canonical.surface), canonical.meta
            )
            return Live(
                self._meter_only(canonical, scope, reservation),
                self._estimate(canonical, scope, reservation, None),
            )
        frame = current_call.get()
        if frame is not None and frame.digest not in (None, canonical.digest):
            # Another request inside the same SDK call, not a retry of the last one: a follow-up
            # hop (Gemini's automatic continuation). It takes a position of its own.
            self._release(frame)
            frame.position = frame.key = None
        if frame is not None:
            frame.digest = canonical.digest
        if frame is not None and frame.position is not None and frame.key is not None:
            position, key = frame.position, frame.key  # the SDK retrying the call
            self._release(frame)
        else:
            position, key = self._claim()
            if frame is not None:
                frame.position, frame.key = position, key
        found = self.exchanges.get(key)
        if found is not None:
            record, first_page = found
            if record.fingerprint != canonical.digest:
                raise self._changed(record, canonical, position)
            if frame is not None and (record.status >= 400 or record.status == 0):
                raise ReplayedFailure(record, self.exchanges.body(record, first_page))
            frames = self.exchanges.frames(record, first_page)
            failure = record.extra.get("failure")
            if isinstance(failure, dict) and failure.get("type") == _TRUNCATED:
                frames = _cut_short(frames, str(failure.get("message", "")))
            return Replay(record.status, _not_a_served_request(record.headers), frames)
        reservation = self.budget.reserve(
            billable_request_bytes(parts.body, canonical.surface), canonical.meta
        )
        commit = self._journaled(key, position, parts, canonical, scope, reservation)
        estimate = self._estimate(canonical, scope, reservation, position)
        if frame is None:
            return Live(commit, estimate)
        stopped = self._journaled(
            key, position, parts, canonical, scope, reservation, estimated=True
        )
        return self._framed(
            frame, commit, estimate, (parts, canonical, scope, reservation), stopped
        )

    def _claim(self) -> tuple[str, bytes]:
        """The next model-call position of the current scope, and its exchange key."""
        position = self.next_position("llm")
        index = int(position.rsplit("llm", 1)[1])
        return position, exchange_key(self.run.id, current_scope.get().name, index)

    def replays(self, frame: CallFrame) -> bool:
        """Whether the SDK call of `frame` will be answered from the journal (its reply, its
        error, or `ReplayInputChanged`) without sending anything, so it needs no rate-limit slot.

        It claims the call's position now, the one its requests then take in `plan`, so that two
        calls started together never both look at the same position. A call passed through, or
        made inside a step or tool, is always sent live.
        """
        if journal_bypass.get() or current_scope.get().within != "run":
            return False
        if frame.key is None:
            frame.position, frame.key = self._claim()
        return self.exchanges.get(frame.key) is not None

    # -- one SDK-level call: retries share its position, only its outcome is journaled --------

    def _framed(
        self,
        frame: CallFrame,
        commit: Callable[[Reply], None],
        estimate: Callable[[Reply], None],
        sent: tuple[RequestParts, Canonical, Scope, Reservation],
        stopped: Callable[[Reply], None],
    ) -> Live:
        frame.sent = sent
        reservation = sent[3]

        def complete(reply: Reply) -> None:
            if frame.sent is sent:
                frame.sent = None
            if reply.status < 400:
                commit(reply)
                return
            size = sum(len(f) for f in reply.frames)
            kept = Reply(
                status=reply.status,
                headers=[(k, v) for k, v in reply.headers if k.lower() in ERROR_HEADERS],
                frames=reply.frames if size <= ERROR_BODY_CAP else [],
                elapsed_ms=reply.elapsed_ms,
                streamed=False,
                decoded=True,
            )
            frame.held = (commit, kept, reservation)

        def abandon(reply: Reply) -> None:
            if frame.sent is sent:
                frame.sent = None
            if reply.status >= 400:
                self.budget.settle(reservation, None)  # an error reply the SDK retries
            elif _finished_but_usage(sent[1], reply):
                stopped(reply)  # stopped on the last `finish_reason` chunk: journaled, estimated
            else:
                estimate(reply)

        def truncated(reply: Reply) -> None:
            if reply.status >= 400:
                abandon(reply)  # an error body cut short: the SDK raises its own error
                return
            if frame.sent is sent:
                frame.sent = None
            self._truncated(frame, reply, sent)

        return Live(complete, abandon, truncated)

    def _truncated(
        self,
        frame: CallFrame,
        reply: Reply,
        sent: tuple[RequestParts, Canonical, Scope, Reservation],
    ) -> None:
        """The provider ended the call's stream without its terminal frame: journal that as the
        call's outcome (with what did arrive, metered as an estimate), and raise it."""
        parts, canonical, scope, reservation = sent
        position = frame.position
        message = (
            f"the provider ended the stream of the model call at {position} without its "
            "terminal frame; the run journaled this as the call's outcome, so a resume raises "
            "it again: catch ProviderStreamTruncated and make a new call to ask again"
        )
        if frame.key is None or position is None:
            self.budget.settle(reservation, None)
            raise ProviderStreamTruncated(message)
        payload = self._llm_payload(canonical, reply, scope, position)
        payload["total_tokens"] = max(payload["total_tokens"], reservation.tokens)
        payload.update(estimated=True, error=_TRUNCATED)
        self._record_call(
            frame.key,
            parts,
            canonical,
            reply,
            payload,
            extra={"failure": {"type": _TRUNCATED, "message": message}},
        )
        self.budget.settle(reservation, None)
        raise ProviderStreamTruncated(message)

    def _release(self, frame: CallFrame) -> None:
        """The SDK sends the call again: what its last attempt got was not the outcome."""
        if frame.held is not None:
            self.budget.settle(frame.held[2], None)
            frame.held = None
        if frame.sent is not None:
            self.budget.settle(frame.sent[3], None)  # the transport raised; nothing came back
            frame.sent = None

    def end_call(self, frame: CallFrame, failure: dict[str, str] | None = None) -> None:
        """The SDK call of `frame` raised: journal the error reply it gave up on, else the
        transport `failure` of its last attempt (`type` and `message`) when one is given."""
        if frame.held is not None:
            commit, reply, _ = frame.held
            frame.held = None
            commit(reply)
            return
        if frame.sent is None:
            return
        parts, canonical, scope, reservation = frame.sent
        frame.sent = None
        if failure is None or frame.key is None or frame.position is None:
            self.budget.settle(reservation, None)
            return
        failure = {
            k: scrub.scrub_text(v, scrub.secret_values(parts.headers, parts.url))
            for k, v in failure.items()
        }
        empty = Reply(status=0, headers=[], frames=[], elapsed_ms=0.0, streamed=False)
        payload = self._llm_payload(canonical, empty, scope, frame.position)
        self._record_call(frame.key, parts, canonical, empty, payload, extra={"failure": failure})
        self.budget.settle(reservation, None)

    def _changed(
        self, record: ExchangeRecord, canonical: Canonical, position: str
    ) -> ReplayInputChanged:
        recorded = self.exchanges.request(record).get("compared", {})
        differences = diff(recorded, canonical.compared) or ["the request's surface changed"]
        lines = "\n".join(f"  - {d}" for d in differences)
        return ReplayInputChanged(
            f"run {self.run.id}: the model call at {position} differs from the one journaled "
            f"there:\n{lines}\nA resumed run must ask what it asked before; start a new run (or "
            "fork this one) to ask something else.",
            differences=differences,
        )

    def _llm_payload(
        self, canonical: Canonical, reply: Reply, scope: Scope, position: str | None
    ) -> dict[str, Any]:
        usage = usage_from_reply(canonical.surface, b"".join(reply.frames), reply.streamed)
        alias = deployment(canonical.meta)  # an Azure deployment: only the reply names a model
        requested = alias or requested_model(canonical.meta)
        model = usage.model or requested
        # An alias with a price row of its own is priced by it, else by the model that served it.
        priced = alias if alias is not None and prices.row(alias) else model
        if alias is None and requested is not None and _on_a_cloud(canonical):
            # A cloud's id (`us.anthropic.claude-haiku-4-5-20251001-v1:0`) is priced as asked,
            # else by its canonical form, which is what `model` records.
            model, priced = canonical_model(requested), requested
        payload = {
            "position": position,
            "surface": canonical.surface,
            "model": model,
            "requested_model": requested,
            "status": reply.status,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "total_tokens": usage.total_tokens,
            "cost_usd": prices.cost(usage, priced),
            "estimated": False,
            "within": scope.within,
            "step_id": scope.unit,
        }
        if usage.error is not None:
            payload["error"] = usage.error  # billed, but the provider reported a failed call
        return payload

    def _journaled(
        self,
        key: bytes,
        position: str,
        parts: RequestParts,
        canonical: Canonical,
        scope: Scope,
        reservation: Reservation,
        *,
        estimated: bool = False,
    ) -> Callable[[Reply], None]:
        def commit(reply: Reply) -> None:
            payload = self._llm_payload(canonical, reply, scope, position)
            if estimated:  # the usage chunk asked for never arrived
                payload["total_tokens"] = max(payload["total_tokens"], reservation.tokens)
                payload["estimated"] = True
            if self.facts.get(position) is not None:
                # Bytes that followed the terminal frame: amend the exchange, count it once.
                record_exchange(self.exchanges, key, parts, canonical, reply)
                return
            try:
                self._record_call(key, parts, canonical, reply, payload)
            except PayloadTooLarge as exc:
                # Not journaled, so a resume asks again; but this reply was paid for.
                payload.update(position=None, abandoned_at=position, error="PayloadTooLarge")
                self.write("llm:done", payload)
                if current_call.get() is not None:
                    raise RecordRefused(exc) from exc  # still inside the SDK's retry loop
                raise
            finally:
                self.budget.settle(reservation, None)

        return commit

    def _record_call(
        self,
        key: bytes,
        parts: RequestParts,
        canonical: Canonical,
        reply: Reply,
        payload: dict[str, Any],
        *,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Journal a call's outcome and its `llm:done` in one transaction fenced by the lease."""
        written: list[Event] = []

        def with_event(txn: lmdb.Transaction, record: ExchangeRecord) -> None:
            self.journal.check_lease(txn, self.run.id, self.lease)
            written.append(self.journal.append_in(txn, self.run.id, "llm:done", payload))

        record_exchange(self.exchanges, key, parts, canonical, reply, extra=extra, also=with_event)
        with self._lock:
            for event in written:
                self._learn(event)

    def _meter_only(
        self, canonical: Canonical, scope: Scope, reservation: Reservation
    ) -> Callable[[Reply], None]:
        done = threading.Event()

        def meter(reply: Reply) -> None:
            if done.is_set():
                return
            done.set()
            self.budget.settle(reservation, None)
            self.write("llm:done", self._llm_payload(canonical, reply, scope, None))

        return meter

    def _estimate(
        self, canonical: Canonical, scope: Scope, reservation: Reservation, position: str | None
    ) -> Callable[[Reply], None]:
        """Meter, once, a reply that ended unfinished: it was (partly) billed, so it counts, at
        the larger of what it reported and the worst case reserved for it."""

        def meter(reply: Reply) -> None:
            self.budget.settle(reservation, None)
            payload = self._llm_payload(canonical, reply, scope, None)
            # Text and tool arguments that had streamed were billed as output, usage or not.
            arrived = arrived_output_tokens(
                canonical.surface, b"".join(reply.frames), reply.streamed
            )
            if arrived > payload["output_tokens"]:
                payload["total_tokens"] += arrived - payload["output_tokens"]
                payload["output_tokens"] = arrived
            payload["total_tokens"] = max(payload["total_tokens"], reservation.tokens)
            payload.update(estimated=True, abandoned_at=position)
            self.write("llm:done", payload)

        return meter


def rebuild_error(error: dict[str, Any]) -> BaseException:
    """The exception a journaled failure replays as: Pyrula's own types exactly, others by name."""
    from pyrula import errors

    kind = error.get("type", "Exception")
    message = error.get("message", "")
    if kind == "BudgetExceeded":
        return BudgetExceeded(message, limit=error.get("limit", ""), code=error.get("code", ""))
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        try:
            return cls(message)
        except TypeError:
            pass
    return StepFailed(kind, message)


class StepFailed(Exception):
    """A step or tool failed on an earlier attempt; its journaled error, replayed."""

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        super().__init__(f"{type_name}: {message}")


def describe_error(exc: BaseException) -> dict[str, Any]:
    data: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, BudgetExceeded):
        data.update(limit=exc.limit, code=exc.code)
    return data


def to_json_value(value: Any) -> Any:
    """Check that a value can be journaled, the way it will come back on replay."""
    from pyrula.runtime.journal import _dump

    return json.loads(_dump(value))
