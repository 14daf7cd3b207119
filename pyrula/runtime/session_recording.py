"""The recording side of a run's session: a model call sent live is journaled with its
`llm:done` as its outcome arrives, or metered only (inside a step or tool), or metered as an
estimate when it ends unfinished.

An SDK-level call (`CallFrame`) journals only its outcome: a success as it arrives, an error
reply once the SDK gives up retrying it (`end_call`), a stream cut short as
`ProviderStreamTruncated` (which its replay raises again, `session_replay.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrula.errors import PayloadTooLarge, ProviderStreamTruncated, RecordRefused
from pyrula.fingerprints import Canonical, RequestParts, surfaces
from pyrula.journal import scrub
from pyrula.journal.async_store import acall
from pyrula.journal.exchanges import ExchangeRecord, Exchanges
from pyrula.journal.recorder import Reply, record_exchange
from pyrula.journal.store import Txn
from pyrula.replies import openai_chat
from pyrula.runtime.calls import ERROR_HEADERS, CallFrame, HeldError, SentCall, current_run
from pyrula.runtime.limits import Reservation
from pyrula.runtime.llm_events import estimated_payload, llm_payload
from pyrula.runtime.positions import Scope
from pyrula.runtime.runstore import Event
from pyrula.runtime.session_replay import TRUNCATED
from pyrula.transport.core import Callbacks, Live
from pyrula.transport.framing import completion_for

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt

# What a journaled provider error keeps of its body: up to this many bytes.
ERROR_BODY_CAP = 16 * 1024


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


class CallRecorder:
    """Journals (or meters) the model calls an attempt sends live."""

    def __init__(self, attempt: Attempt, exchanges: Exchanges) -> None:
        self._attempt = attempt
        self._budget = attempt.budget
        self._run_id = attempt.run.id
        self.exchanges = exchanges

    def framed(
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
        payload.update(estimated=True, error=TRUNCATED)
        self._record_call(
            frame.key,
            parts,
            canonical,
            reply,
            payload,
            extra={"failure": {"type": TRUNCATED, "message": message}},
        )
        self._budget.settle(reservation, None)
        raise ProviderStreamTruncated(message)

    def release(self, frame: CallFrame) -> None:
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

    def journaled(
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
                self._attempt.run_store.check_lease(txn, self._run_id, self._attempt.lease)
                payload["exchange"] = record.id  # the reply this call replays from
                event = self._attempt.run_store.append_in(txn, self._run_id, "llm:done", payload)
                written[:] = [event]

            record_exchange(
                self.exchanges, key, parts, canonical, reply, extra=extra, also=with_event
            )
        self._attempt.remember(written)

    def meter_only(
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

    def estimate(
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
