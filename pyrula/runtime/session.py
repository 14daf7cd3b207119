"""The run's transport session, its planning side: each model call takes a position and is
planned as a replay or as a live call.

While a run's body executes, its `RunSession` is the transport `Session`: a model call takes
the next position of its scope, and a journaled exchange there is replayed (checked by request
fingerprint) instead of sent (`session_replay.py`); else the call goes out live, metered against
the run's budget, and its reply is journaled with its `llm:done` event (`session_recording.py`).
Inside a step or tool a call is metered only.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pyrula.errors import RunAttemptEnded
from pyrula.fingerprints import Canonical, RequestParts
from pyrula.journal.async_store import acall, offload, remote
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import run_key
from pyrula.journal.recorder import Reply
from pyrula.journal.store import Store
from pyrula.runtime.calls import CallFrame, SentCall, current_run
from pyrula.runtime.llm_events import llm_payload
from pyrula.runtime.media import billable_request_bytes
from pyrula.runtime.open_calls import OpenCalls
from pyrula.runtime.session_recording import CallRecorder
from pyrula.runtime.session_replay import replayed
from pyrula.transport.core import Callbacks, Live, Plan, Session, current_session, through

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt


class RunSession:
    """The transport `Session` of one attempt at a run, while its body executes."""

    def __init__(self, attempt: Attempt) -> None:
        self._attempt = attempt
        self._budget = attempt.budget
        self._run_id = attempt.run.id
        self.exchanges = Exchanges(attempt.run_store.store)
        self.open_calls = OpenCalls()
        self.recorder = CallRecorder(attempt, self.exchanges)
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
                    self.recorder.meter_only(canonical, scope, reservation, call_index),
                    self.recorder.estimate(canonical, scope, reservation, None, call_index),
                )
            )
        frame = run.call
        if frame is not None and frame.digest not in (None, canonical.digest):
            # Another request inside the same SDK call, not a retry of the last one: a follow-up
            # hop (Gemini's automatic continuation). It takes a position of its own.
            self.recorder.release(frame)
            frame.position = frame.key = None
        if frame is not None:
            frame.digest = canonical.digest
        if frame is not None and frame.position is not None and frame.key is not None:
            position, key = frame.position, frame.key  # the SDK retrying the call
            self.recorder.release(frame)
        else:
            position, key = self._claim()
            if frame is not None:
                frame.position, frame.key = position, key
        found = self.exchanges.get(key)
        if found is not None:
            return replayed(
                self.exchanges, found, canonical, position, self._run_id, framed=frame is not None
            )
        reservation = self._budget.reserve(
            billable_request_bytes(parts.body, canonical.surface, canonical.meta), canonical.meta
        )
        commit = self.recorder.journaled(key, position, parts, canonical, scope, reservation)
        estimate = self.recorder.estimate(canonical, scope, reservation, position)
        if frame is None:
            return Live(Callbacks(commit, estimate))
        stopped = self.recorder.journaled(
            key, position, parts, canonical, scope, reservation, estimated=True
        )
        return self.recorder.framed(
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

    async def aend_call(self, frame: CallFrame, failure: dict[str, str] | None = None) -> None:
        """`end_call` from the run's event loop (`CallRecorder.aend_call`)."""
        await self.recorder.aend_call(frame, failure)

    def end_call(self, frame: CallFrame, failure: dict[str, str] | None = None) -> None:
        """The SDK call of `frame` raised: journal the outcome it gave up on
        (`CallRecorder.end_call`)."""
        self.recorder.end_call(frame, failure)
