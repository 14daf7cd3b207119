"""The run's transport session: each model call planned, replayed from the journal, or recorded.

While a run's body executes, its `RunSession` is the transport `Session`: a model call takes
the next position of its scope, and a journaled exchange there is replayed (checked by request
fingerprint) instead of sent; else the call goes out live, metered against the run's budget, and
its reply is journaled with its `llm:done` event. Inside a step or tool a call is metered only.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyrula.errors import (
    PayloadTooLarge,
    ProviderStreamTruncated,
    RecordRefused,
    ReplayInputChanged,
    RunAttemptEnded,
)
from pyrula.fingerprints import Canonical, RequestParts, diff, surfaces
from pyrula.journal import scrub
from pyrula.journal.async_store import acall, offload, remote
from pyrula.journal.exchanges import ExchangeRecord, Exchanges
from pyrula.journal.keys import run_key
from pyrula.journal.recorder import Reply, record_exchange
from pyrula.journal.store import Store, Txn
from pyrula.replies import openai_chat
from pyrula.runtime.calls import (
    ERROR_HEADERS,
    CallFrame,
    HeldError,
    ReplayedFailure,
    SentCall,
    current_run,
)
from pyrula.runtime.limits import Reservation
from pyrula.runtime.llm_events import estimated_payload, llm_payload
from pyrula.runtime.media import billable_request_bytes
from pyrula.runtime.open_calls import OpenCalls
from pyrula.runtime.positions import Scope
from pyrula.runtime.runstore import Event
from pyrula.transport.core import (
    Callbacks,
    Live,
    Plan,
    Replay,
    Session,
    current_session,
    through,
)
from pyrula.transport.framing import completion_for

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt

# What a journaled provider error keeps of its body: up to this many bytes.
ERROR_BODY_CAP = 16 * 1024

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


# A replayed reply was not served by the provider for this request, so it names no request id:
# the SDKs then report `request_id` as None, not an id whose logs hold some other attempt.
_REQUEST_IDS = frozenset({"request-id", "x-request-id"})


def _not_a_served_request(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in _REQUEST_IDS]


class RunSession:
    """The transport `Session` of one attempt at a run, while its body executes."""

    def __init__(self, attempt: Attempt) -> None:
        self._attempt = attempt
        self._budget = attempt.budget
        self._run_id = attempt.run.id
        self.exchanges = Exchanges(attempt.journal.store)
        self.open_calls = OpenCalls()
        # A session active where the run executes in-process (a test's cassette) stands in for
        # the provider: every call the run sends live is answered, or recorded, there.
        outer = current_session()
        self.provider: Session | None = outer.provider if isinstance(outer, RunSession) else outer
        # Where an async client's plan waits: the run's store; or, that one local, the store of
        # a stand-in (a cassette names it `store`) on a server, whose reads the plan then makes.
        self._plan_store = self.exchanges.store
        stand_in = getattr(self.provider, "store", None)
        if isinstance(stand_in, Store) and remote(stand_in) and not remote(self._plan_store):
            self._plan_store = stand_in
        # An async client's calls are planned one at a time, in the order they arrive.
        self._planning = asyncio.Lock()

    async def aplan(self, parts: RequestParts, canonical: Canonical) -> Plan:
        """`plan` for an async client, made on a store thread where the journal (or a cassette
        answering for the provider) is on a server, so its reads never hold the loop; a replayed
        reply's further frame pages are read there too (`Exchanges.frames`). Calls are planned
        one at a time in their order of arrival, so each claims the position it would claim on
        the loop. Where the journal is on a server, a recorded reply is then written off the
        loop too (the tracked sink's `offload`)."""
        async with self._planning:  # on LMDB alone the plan is made in place: never contended
            return await acall(self._plan_store, self.plan, parts, canonical)

    async def areplays(self, frame: CallFrame) -> bool:
        """`replays` from the event loop, without blocking it where the journal is on a
        server; the position is claimed on the loop, only the read is done on a store thread.
        The claim waits for the plans of the calls that arrived before it, so positions are
        taken in the order the calls arrived whichever way each takes its own."""
        async with self._planning:
            key = self._replay_key(frame)
        if key is None:
            return False
        return await acall(self.exchanges.store, self.exchanges.get, key) is not None

    def plan(self, parts: RequestParts, canonical: Canonical, *, blocking: bool = False) -> Plan:
        planned = self._planned(parts, canonical, blocking=blocking)
        if isinstance(planned, Live) and self.provider is not None:
            return through(self.provider, planned, parts, canonical, blocking=blocking)
        return planned

    def _planned(self, parts: RequestParts, canonical: Canonical, *, blocking: bool) -> Plan:
        if self.open_calls.closed:
            # A thread the body left running asks after the attempt ended: nothing is sent.
            raise RunAttemptEnded(
                f"run {self._run_id}: this attempt has ended, so the call was not sent"
            )
        planned = self._plan(parts, canonical, blocking=blocking)
        if isinstance(planned, Live) and planned.sink is not None:
            # Tracked until its reply ends, so the attempt's end can settle it (`close`).
            scope = current_run().scope

            def describe(reply: Reply) -> dict[str, object]:
                return llm_payload(canonical, reply, scope, None)

            sink = self.open_calls.track(planned.sink, describe, offload(self.exchanges.store))
            return Live(sink)
        return planned

    def close(self, *, meter: bool) -> int:
        """The attempt ends: meter each call still open once, as an estimate (`meter`), and
        write nothing for any of them after this."""
        return self.open_calls.close(meter=meter)

    def _plan(self, parts: RequestParts, canonical: Canonical, *, blocking: bool) -> Plan:
        if blocking:
            self._attempt.refuse_loop_thread()
        self._attempt.check_cancel()
        run = current_run()
        if run.bypassed:
            return Live(None)
        scope = run.scope
        if scope.within != "run":
            # Inside a step or tool the unit's result is what is durable: meter, do not journal.
            # `call_index` counts the unit's model calls (`<unit>/llm<n>`), for the spend record.
            call_index = int(self._attempt.next_position("llm").rsplit("llm", 1)[1])
            reservation = self._budget.reserve(
                billable_request_bytes(parts.body, canonical.surface, canonical.meta),
                canonical.meta,
            )
            return Live(
                Callbacks(
                    self._meter_only(canonical, scope, reservation, call_index),
                    self._estimate(canonical, scope, reservation, None, call_index),
                )
            )
        frame = run.call
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
        reservation = self._budget.reserve(
            billable_request_bytes(parts.body, canonical.surface, canonical.meta), canonical.meta
        )
        commit = self._journaled(key, position, parts, canonical, scope, reservation)
        estimate = self._estimate(canonical, scope, reservation, position)
        if frame is None:
            return Live(Callbacks(commit, estimate))
        stopped = self._journaled(
            key, position, parts, canonical, scope, reservation, estimated=True
        )
        return self._framed(
            frame, commit, estimate, SentCall(parts, canonical, scope, reservation), stopped
        )

    def _claim(self) -> tuple[str, bytes]:
        """The next model-call position of the current scope, and its exchange key."""
        position = self._attempt.next_position("llm")
        index = int(position.rsplit("llm", 1)[1])
        return position, run_key(self._run_id, current_run().scope.name, index)

    def replays(self, frame: CallFrame) -> bool:
        """Whether the SDK call of `frame` will be answered from the journal (its reply, its
        error, or `ReplayInputChanged`) without sending anything, so it needs no rate-limit slot.

        It claims the call's position now, the one its requests then take in `plan`, so that two
        calls started together never both look at the same position. A call passed through, or
        made inside a step or tool, is always sent live.
        """
        key = self._replay_key(frame)
        return key is not None and self.exchanges.get(key) is not None

    def _replay_key(self, frame: CallFrame) -> bytes | None:
        """The exchange key of `frame`'s call, its position claimed now; None for a call that is
        always sent live."""
        run = current_run()
        if run.bypassed or run.scope.within != "run":
            return None
        if frame.key is None:
            frame.position, frame.key = self._claim()
        return frame.key

    # -- one SDK-level call: retries share its position, only its outcome is journaled --------

    def _framed(
        self,
        frame: CallFrame,
        commit: Callable[[Reply], None],
        estimate: Callable[[Reply], None],
        sent: SentCall,
        stopped: Callable[[Reply], None],
    ) -> Live:
        frame.sent = sent
        reservation = sent.reservation

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
            frame.held = HeldError(commit, kept, reservation)

        def abandon(reply: Reply) -> None:
            if frame.sent is sent:
                frame.sent = None
            if reply.status >= 400:
                self._budget.settle(reservation, None)  # an error reply the SDK retries
            elif _finished_but_usage(sent.canonical, reply):
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

        return Live(Callbacks(complete, abandon, truncated))

    def _truncated(self, frame: CallFrame, reply: Reply, sent: SentCall) -> None:
        """The provider ended the call's stream without its terminal frame: journal that as the
        call's outcome (with what did arrive, metered as an estimate), and raise it."""
        parts, canonical, scope, reservation = (
            sent.parts,
            sent.canonical,
            sent.scope,
            sent.reservation,
        )
        position = frame.position
        message = (
            f"the provider ended the stream of the model call at {position} without its "
            "terminal frame; the run journaled this as the call's outcome, so a resume raises "
            "it again: catch ProviderStreamTruncated and make a new call to ask again"
        )
        if frame.key is None or position is None:
            self._budget.settle(reservation, None)
            raise ProviderStreamTruncated(message)
        payload = llm_payload(canonical, reply, scope, position)
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
        self._budget.settle(reservation, None)
        raise ProviderStreamTruncated(message)

    def _release(self, frame: CallFrame) -> None:
        """The SDK sends the call again: what its last attempt got was not the outcome."""
        if frame.held is not None:
            self._budget.settle(frame.held.reservation, None)
            frame.held = None
        if frame.sent is not None:
            self._budget.settle(frame.sent.reservation, None)  # the transport raised: no reply
            frame.sent = None

    async def aend_call(self, frame: CallFrame, failure: dict[str, str] | None = None) -> None:
        """`end_call` from the run's event loop: a failure to journal is written on a store
        thread where the journal is on a server."""
        await acall(self.exchanges.store, self.end_call, frame, failure)

    def end_call(self, frame: CallFrame, failure: dict[str, str] | None = None) -> None:
        """The SDK call of `frame` raised: journal the error reply it gave up on, else the
        transport `failure` of its last attempt (`type` and `message`) when one is given."""
        if frame.held is not None:
            held, frame.held = frame.held, None
            held.commit(held.reply)
            return
        if frame.sent is None:
            return
        sent, frame.sent = frame.sent, None
        parts, canonical, scope, reservation = (
            sent.parts,
            sent.canonical,
            sent.scope,
            sent.reservation,
        )
        if failure is None or frame.key is None or frame.position is None:
            self._budget.settle(reservation, None)
            return
        failure = {
            k: scrub.scrub_text(v, scrub.secret_values(parts.headers, parts.url))
            for k, v in failure.items()
        }
        empty = Reply(status=0, headers=[], frames=[], elapsed_ms=0.0, streamed=False)
        payload = llm_payload(canonical, empty, scope, frame.position)
        self._record_call(frame.key, parts, canonical, empty, payload, extra={"failure": failure})
        self._budget.settle(reservation, None)

    def _changed(
        self, record: ExchangeRecord, canonical: Canonical, position: str
    ) -> ReplayInputChanged:
        recorded = self.exchanges.request(record).get("compared", {})
        differences = diff(recorded, canonical.compared) or ["the request's surface changed"]
        lines = "\n".join(f"  - {d}" for d in differences)
        return ReplayInputChanged(
            f"run {self._run_id}: the model call at {position} differs from the one journaled "
            f"there:\n{lines}\nA resumed run must ask what it asked before; start a new run (or "
            "fork this one) to ask something else.",
            differences=differences,
        )

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
            payload = llm_payload(canonical, reply, scope, position)
            if estimated:  # the usage chunk asked for never arrived
                payload["total_tokens"] = max(payload["total_tokens"], reservation.tokens)
                payload["estimated"] = True
            if self._attempt.facts.get(position) is not None:
                # Bytes that followed the terminal frame: amend the exchange, count it once.
                record_exchange(self.exchanges, key, parts, canonical, reply)
                return
            try:
                self._record_call(key, parts, canonical, reply, payload)
            except PayloadTooLarge as exc:
                # Not journaled, so a resume asks again; but this reply was paid for.
                payload.update(position=None, abandoned_at=position, error="PayloadTooLarge")
                self._attempt.write("llm:done", payload)
                if current_run().call is not None:
                    raise RecordRefused(exc) from exc  # still inside the SDK's retry loop
                raise
            finally:
                self._budget.settle(reservation, None)

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
        """Journal a call's outcome and its `llm:done` in one transaction fenced by the lease
        (after the facts the attempt has logged, in the same one)."""
        written: list[Event] = []
        with self._attempt.logged_facts() as logged:

            def with_event(txn: Txn, record: ExchangeRecord) -> None:
                logged(txn)
                self._attempt.journal.check_lease(txn, self._run_id, self._attempt.lease)
                payload["exchange"] = record.id  # the reply this call replays from
                event = self._attempt.journal.append_in(txn, self._run_id, "llm:done", payload)
                written[:] = [event]

            record_exchange(
                self.exchanges, key, parts, canonical, reply, extra=extra, also=with_event
            )
        self._attempt.remember(written)

    def _meter_only(
        self, canonical: Canonical, scope: Scope, reservation: Reservation, call_index: int
    ) -> Callable[[Reply], None]:
        done = threading.Event()

        def meter(reply: Reply) -> None:
            if done.is_set():
                return
            done.set()
            self._budget.settle(reservation, None)
            payload = llm_payload(canonical, reply, scope, None)
            payload["call_index"] = call_index
            self._attempt.write("llm:done", payload)

        return meter

    def _estimate(
        self,
        canonical: Canonical,
        scope: Scope,
        reservation: Reservation,
        position: str | None,
        call_index: int | None = None,
    ) -> Callable[[Reply], None]:
        """Meter, once, a reply that ended unfinished: it was (partly) billed, so it counts, at
        the larger of what it reported and the worst case reserved for it."""

        def meter(reply: Reply) -> None:
            self._budget.settle(reservation, None)
            payload = estimated_payload(canonical, reply, scope, reservation.tokens)
            payload["abandoned_at"] = position
            if call_index is not None:
                payload["call_index"] = call_index
            self._attempt.write("llm:done", payload)

        return meter
