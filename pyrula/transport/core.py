"""The stack-neutral journal core: here is a request; give me a reply, recorded or replayed.

The adapters only translate types around this: four transports (httpx and httpx2, sync and async)
and botocore's `before-send` hook (`pyrula.transport.botocore`).
Who decides between recording and replaying is a `Session` (a cassette now, a run later); the core
does the framing, teeing and committing that every session needs.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from pyrula.errors import PayloadTooLarge, RecordRefused
from pyrula.fingerprints import Canonical, RequestParts, cached_or_sent, canonicalize
from pyrula.journal.recorder import Reply
from pyrula.transport.current import Current
from pyrula.transport.framing import (
    Completion,
    Decoder,
    completion_for,
    decoder_for,
    is_streamed,
)


class Replay(NamedTuple):
    """A recorded reply to hand back instead of sending the request (a tuple: made per replayed
    call, and a tuple is built at a fraction of a frozen dataclass's cost)."""

    status: int
    headers: list[tuple[str, str]]
    frames: Iterator[bytes]
    # When each frame arrived while recording (ms after sending), when that was recorded.
    frame_ms: list[float] | None = None


def header_bytes(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Recorded headers as the bytes to send, a value that is not ASCII in UTF-8: the HTTP stack
    decodes it back to the text read live (decoded from UTF-8, or Latin-1 when it was not)."""
    return [(name.encode("latin-1"), value.encode("utf-8")) for name, value in headers]


class Sink(Protocol):
    """Where a live reply goes as the tee sees it begin and end.

    `cap` is the record cap of the store it writes to (0: none). A reply whose frames pass it is
    handed to `complete` at once, before the chunk that crossed it reaches the reader, so the
    store refuses it there (`PayloadTooLarge`) instead of after the whole reply was held.
    """

    @property
    def cap(self) -> int: ...

    def sent(self) -> None:
        """The request left whole: the provider is working on it. A sink may make its record's
        request side now, while the reply is awaited; a transport that cannot tell does not
        call this (the sink then makes it at `complete`). It must not raise."""

    def began(self) -> None:
        """The reply's head arrived: from now on it is being paid for."""

    def complete(self, reply: Reply) -> None:
        """The reply is whole by its provider's rules (and again if bytes follow its end)."""

    def abandon(self, reply: Reply) -> None:
        """The reader stopped before the reply was whole: what had arrived."""

    def truncated(self, reply: Reply) -> None:
        """The reply ended before its terminal frame; what this raises reaches the reader."""


# Runs a sink's call (which may wait on a store's server) from an event loop without blocking
# it: `journal.async_store.offload(store)`. A sink may name one as its `offload` attribute.
Offload = Callable[[Callable[[], None]], Awaitable[None]]


def offload_of(sink: object) -> Offload | None:
    """The sink's `offload`, if it has one: an async tee then runs its calls through it."""
    found: Offload | None = getattr(sink, "offload", None)
    return found


@dataclass(slots=True)  # not frozen: one per recording (as `journal.exchanges.Exchange`)
class Callbacks:
    """A `Sink` made of functions: `on_abandon` (when set) takes an unfinished reply, and
    `on_truncated` a truncated one (default: `on_abandon`); `offload`, where an async tee runs
    them (their store on a server); `on_sent`, called when the request left whole."""

    on_complete: Callable[[Reply], None]
    on_abandon: Callable[[Reply], None] | None = None
    on_truncated: Callable[[Reply], None] | None = None
    cap: int = 0
    offload: Offload | None = None
    on_sent: Callable[[], None] | None = None

    def sent(self) -> None:
        if self.on_sent is not None:
            self.on_sent()

    def began(self) -> None:
        return None

    def complete(self, reply: Reply) -> None:
        self.on_complete(reply)

    def abandon(self, reply: Reply) -> None:
        if self.on_abandon is not None:
            self.on_abandon(reply)

    def truncated(self, reply: Reply) -> None:
        (self.on_truncated or self.abandon)(reply)


@dataclass(frozen=True, slots=True)
class Live:
    """Send the request; the reply goes to `sink` as it arrives (None: keep nothing). The
    transport calls `unsent` (when set) if the send raises: no reply will reach the sink."""

    sink: Sink | None
    unsent: Callable[[], None] | None = None


Plan = Replay | Live


class Session(Protocol):
    """Decides, per request, whether to replay, record or pass through.

    `blocking` is True when a sync client sends: a run refuses that on its own loop thread.
    """

    def plan(self, parts: RequestParts, canonical: Canonical, *, blocking: bool) -> Plan: ...


# The session deciding a request made here (threads without the caller's context see the
# innermost one pushed).
_sessions: Current[Session] = Current("pyrula_session")
current_session = _sessions.get  # once per request: the bound method, no wrapper around it


def push_session(session: Session, *, process_wide: bool = True) -> object:
    """Make `session` current; `process_wide` also lets context-less threads find it."""
    return _sessions.push(session, process_wide=process_wide)


def pop_session(session: Session, token: object) -> None:
    _sessions.pop(session, token)


class Recording:
    """The tee's sink: collects a live reply's frames and commits them at its provider's end."""

    def __init__(
        self,
        canonical: Canonical,
        status: int,
        headers: list[tuple[str, str]],
        sink: Sink,
        started: float,
        *,
        deferred: bool = False,
    ) -> None:
        self._sink = sink
        # With `deferred`, the sink's end-of-reply calls are held for the caller to run
        # (`take_deferred`): an async tee runs them off its event loop before going on.
        self._deferred: list[Callable[[], None]] | None = [] if deferred else None
        sink.began()
        lowered = {k.lower(): v for k, v in headers}
        encoding = lowered.get("content-encoding", "").strip().lower()
        self._decoder: Decoder | None = decoder_for(encoding)
        # The reply is compressed and decoded here: the caller is handed the decoded bytes.
        self.decodes = self._decoder is not None and encoding not in ("", "identity")
        if self.decodes:  # the coded body's length is not the stored body's: not kept
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        content_type = lowered.get("content-type", "")
        self._completion: Completion = completion_for(
            canonical.surface if self._decoder else "",
            content_type,
            canonical.compared,
            canonical.meta,
        )
        self._status = status
        self._headers = headers
        self._started = started
        self._streamed = is_streamed(content_type)  # SSE, or AWS `vnd.amazon.eventstream`
        self._frames: list[bytes] = []
        self._times: list[float] = []
        self._size = 0  # decoded bytes so far, held against the sink's record cap
        # Bytes after the terminal frame (OpenAI chat's `[DONE]`) are kept by re-committing at
        # the end; a caller that stops right after the terminal frame still leaves a record.
        self._committed_frames = 0
        self.finished = False

    def feed(self, chunk: bytes) -> bytes:
        """Take one chunk as it passes; commit first if it completes the reply. Returns the
        chunk decoded (as it is when the reply is not compressed or cannot be decoded)."""
        if self.finished:
            return chunk if self._decoder is None else self._decoder.decode(chunk)
        data = self._decoder.decode(chunk) if self._decoder else chunk
        if data:
            self._frames.append(data)
            self._times.append((time.perf_counter() - self._started) * 1000)
            self._size += len(data)
            if self._sink.cap and self._size > self._sink.cap and not self._committed_frames:
                self._over_cap()
                return data
            self._completion.feed(data)
        if self._completion.complete and not self._committed_frames:
            self._commit()
        return data

    def eof(self) -> bytes:
        """The reply ended: commit it if its provider's rules say it is whole. Returns what the
        decoder held back (the end of a compressed body)."""
        if self.finished:
            return b""
        tail = b""
        if self._decoder:
            tail = self._decoder.flush()
            if tail:
                self._frames.append(tail)
                self._times.append((time.perf_counter() - self._started) * 1000)
                self._completion.feed(tail)
        if len(self._frames) > self._committed_frames and (
            self._completion.complete or self._completion.at_eof()
        ):
            self._commit()
        elif not self._committed_frames:
            self.finished = True
            reply = self._reply(list(self._frames))
            self._deliver(lambda: self._sink.truncated(reply))  # never recorded as complete
        self.finished = True
        return tail

    def abandon(self) -> None:
        """The caller stopped reading. A reply already complete keeps what arrived after its
        terminal frame (a usage chunk the SDK did not read to); an unfinished one is dropped."""
        if not self.finished and not self._committed_frames:
            reply = self._reply(list(self._frames))
            self._deliver(lambda: self._sink.abandon(reply))
        elif not self.finished and len(self._frames) > self._committed_frames:
            self._commit()
        self.finished = True
        self._frames = []

    def _over_cap(self) -> None:
        """The frames alone are past the cap: the reply is handed over now, and the store
        refuses it (in-process this raises before the reader gets the chunk that crossed it; the
        proxy, whose sink commits later on a thread, cuts the reply there). One rule for both:
        docs/record-format.md#size-cap."""
        self.finished = True
        frames, self._frames = self._frames, []
        reply = self._reply(frames)
        self._deliver(lambda: self._sink.complete(reply))

    def _commit(self) -> None:
        amending = self._committed_frames > 0
        self._committed_frames = len(self._frames)
        reply = self._reply(list(self._frames))

        def complete() -> None:
            try:
                self._sink.complete(reply)
            except (PayloadTooLarge, RecordRefused):
                if not amending:
                    raise
                # The reply was recorded whole at its terminal frame; what trailed it (OpenAI's
                # `[DONE]`) does not fit the cap. The record stands as it is, so live and replay
                # end the same way: no error.

        self._deliver(complete)

    def _deliver(self, call: Callable[[], None]) -> None:
        """Make one of the sink's calls now, or hold it for `take_deferred`."""
        if self._deferred is None:
            call()
        else:
            self._deferred.append(call)

    def take_deferred(self) -> list[Callable[[], None]]:
        """The sink's calls held back since the last look, in order (none unless `deferred`):
        the caller makes them before it hands on the chunk it just fed."""
        if not self._deferred:
            return []
        calls, self._deferred = self._deferred, []
        return calls

    def _reply(self, frames: list[bytes]) -> Reply:
        return Reply(
            status=self._status,
            headers=self._headers,
            frames=frames,
            elapsed_ms=(time.perf_counter() - self._started) * 1000,
            streamed=self._streamed,
            decoded=self._decoder is not None,
            frame_ms=tuple(self._times[: len(frames)]),
        )


class _Both:
    """A `Sink` that hands every event to two sinks (a run's journal and a test's cassette)."""

    def __init__(self, first: Sink, second: Sink) -> None:
        self._sinks = (first, second)

    @property
    def cap(self) -> int:
        """The stricter of the two stores' caps (0: neither has one)."""
        caps = [sink.cap for sink in self._sinks if sink.cap]
        return min(caps) if caps else 0

    @property
    def offload(self) -> Offload | None:
        """The first sink's `offload`, else the second's (both calls then run through it)."""
        return offload_of(self._sinks[0]) or offload_of(self._sinks[1])

    def sent(self) -> None:
        for sink in self._sinks:
            sink.sent()

    def began(self) -> None:
        for sink in self._sinks:
            sink.began()

    def complete(self, reply: Reply) -> None:
        for sink in self._sinks:
            sink.complete(reply)

    def abandon(self, reply: Reply) -> None:
        for sink in self._sinks:
            sink.abandon(reply)

    def truncated(self, reply: Reply) -> None:
        for sink in self._sinks:
            sink.truncated(reply)


def through(
    provider: Session, plan: Live, parts: RequestParts, canonical: Canonical, *, blocking: bool
) -> Plan:
    """`plan`, a call going out live, answered by `provider` standing in for the network (a
    test's cassette under an in-process run): replayed from it, with the reply fed to `plan`'s
    sink as a live one would be, or sent and recorded by both."""
    outer = provider.plan(parts, canonical, blocking=blocking)
    if isinstance(outer, Live):
        if plan.sink is None or outer.sink is None:
            return outer if plan.sink is None else plan
        return Live(_Both(plan.sink, outer.sink))
    if plan.sink is None:
        return outer
    offload = None if blocking else offload_of(plan.sink)
    frames = Fed(outer, plan.sink, canonical, offload)
    return Replay(outer.status, outer.headers, frames, outer.frame_ms)


def _fed(replay: Replay, sink: Sink, canonical: Canonical) -> Iterator[bytes]:
    recording = Recording(canonical, replay.status, replay.headers, sink, time.perf_counter())
    try:
        for frame in replay.frames:
            data = recording.feed(frame)
            if data:
                yield data
        tail = recording.eof()
        if tail:
            yield tail
    finally:
        if not recording.finished:
            recording.abandon()


class Fed:
    """The frames of a reply a stand-in provider replays (`through`), fed to a run's sink as
    they are read, as a live reply's are. A sync reader iterates it, the sink's calls made as
    it goes; an async reader (`async for`) has the calls that end the reply made through
    `offload` (off its event loop: the run's journal may sit on a server) before the chunk
    that ended the reply reaches it, as an async tee does."""

    __slots__ = ("_canonical", "_frames", "_offload", "_replay", "_sink")

    def __init__(
        self, replay: Replay, sink: Sink, canonical: Canonical, offload: Offload | None
    ) -> None:
        self._replay, self._sink, self._canonical = replay, sink, canonical
        self._offload = offload
        self._frames: Iterator[bytes] | None = None

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._frames is None:
            self._frames = _fed(self._replay, self._sink, self._canonical)
        return next(self._frames)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        replay = self._replay
        recording = Recording(
            self._canonical,
            replay.status,
            replay.headers,
            self._sink,
            time.perf_counter(),
            deferred=self._offload is not None,
        )
        try:
            for frame in replay.frames:
                data = recording.feed(frame)
                await self._delivered(recording)
                if data:
                    yield data
            tail = recording.eof()
            await self._delivered(recording)
            if tail:
                yield tail
        finally:
            if not recording.finished:
                recording.abandon()
                await self._delivered(recording)

    async def _delivered(self, recording: Recording) -> None:
        for call in recording.take_deferred():
            if self._offload is None:
                call()
            else:
                await self._offload(call)


def plan_request(
    session: Session,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    blocking: bool,
) -> tuple[Plan, Canonical | None]:
    """Fingerprint a request and ask `session` what to do with it. The canonical form is
    None only for a replay found by the request's sent digest (`fingerprint_or_replay`)."""
    parts = RequestParts(method, url, headers, body)
    canonical = fingerprint_or_replay(session, parts)
    if type(canonical) is Replay:
        return canonical, None
    return session.plan(parts, canonical, blocking=blocking), canonical


def fingerprint_or_replay(session: Session, parts: RequestParts) -> Canonical | Replay:
    """The request's canonical form; or, from a session that finds recordings by a request's
    digest as sent (a cassette's `replay_sent`), the replay of a request new to the process
    found that way, without canonicalising it."""
    replay_sent: Callable[[bytes], Replay | None] | None = getattr(session, "replay_sent", None)
    if replay_sent is None:
        return canonicalize(parts)
    known = cached_or_sent(parts)
    if type(known) is not bytes:
        return known
    return replay_sent(known) or canonicalize(parts)


async def aplan_request(
    session: Session, method: str, url: str, headers: Mapping[str, str], body: bytes
) -> tuple[Plan, Canonical | None]:
    """`plan_request` for an async client: a session with an `aplan` (a run's, whose plan
    reads a store that may sit on a server) is asked without blocking the event loop."""
    parts = RequestParts(method=method, url=url, headers=headers, body=body)
    canonical = fingerprint_or_replay(session, parts)
    if type(canonical) is Replay:
        return canonical, None
    aplan: Callable[[RequestParts, Canonical], Awaitable[Plan]] | None = getattr(
        session, "aplan", None
    )
    if aplan is None:
        return session.plan(parts, canonical, blocking=False), canonical
    return await aplan(parts, canonical), canonical
