"""Forwarding a live reply: relayed to the client chunk by chunk, teed into its recording.

`Relay` copies the provider's reply to the client (decoded when it is recorded decoded, held
first when it is a plain reply checked against the record cap); `Tee` feeds the same chunks to a
`Recording` and commits it on a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.to_thread
import httpx
from pyrula.fingerprints import Canonical

from pyrula.errors import PayloadTooLarge, PyrulaError, RecordRefused, StoreError
from pyrula.journal.recorder import Reply
from pyrula.transport.core import Callbacks, Live, Recording

from . import answers, headers
from .log import RecordingHealth, logger
from .wire import ClientGone, ServerConnection

# A recorded plain body up to this size is replayed with a Content-Length; larger, or a stream,
# goes out chunked as its frames come off the store. A live plain reply is framed the same way.
WHOLE_BODY_MAX = 1 << 20

# After the client hangs up, a reply whose terminal frame was already recorded is read on for
# this long, to keep what trails it (OpenAI's `data: [DONE]`) in the record.
_TAIL_S = 2.0


class Hook:
    """The client watcher's way back to the relay, cut when the exchange ends. The cancelled
    watcher's traceback lives on in a reference cycle until the garbage collector runs; through
    the relay it would keep the request (its whole body) and the reply alive with it."""

    __slots__ = ("target",)

    def __init__(self) -> None:
        self.target: Callable[[], None] | None = None

    def __call__(self) -> None:
        if self.target is not None:
            self.target()


class Relay:
    """Copies an upstream reply to the client chunk by chunk, through the tee."""

    def __init__(
        self,
        conn: ServerConnection,
        response: httpx.Response,
        tee: Tee,
        scope: anyio.CancelScope,
    ) -> None:
        self._conn = conn
        self._response = response
        self._tee = tee
        self._scope = scope
        self._length: int | None = None  # the body's declared length, when it has one
        self._delivered = 0

    def client_left(self) -> None:
        """The client is gone. If it had the whole reply (its terminal frame, or every byte of a
        counted body), finish the record and its tail briefly; else drop the recording now."""
        whole = self._length is not None and self._delivered >= self._length
        if self._tee.committed or whole:
            self._scope.deadline = min(self._scope.deadline, anyio.current_time() + _TAIL_S)
        else:
            self._scope.cancel()

    async def run(self, close: bool) -> None:
        response = self._response
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and "transfer-encoding" not in response.headers:
            self._length = int(declared)
        head = headers.client_reply(response.headers.raw, keep_length=self._length is not None)
        if self._tee.decodes:
            # Recorded decoded, so sent decoded: a client sees the same headers and body live and
            # replayed (no Content-Encoding; a plain body's length is the decoded one).
            head = headers.without(head, (b"content-encoding", b"content-length"))
        if self._tee.wanted:
            head = [*head, *self._tee.health.header()]
            content_type = response.headers.get("content-type", "")
            if "event-stream" not in content_type and "eventstream" not in content_type:
                await self._whole(head, close)  # a plain reply is checked against the cap first
                return
        await self._send(self._conn.encode_head(response.status_code, head, close=close))
        async for chunk in response.aiter_raw():
            self._delivered += len(chunk)
            data = await self._tee.feed(chunk)  # commits first if this chunk completes the reply
            if self._length is not None and self._delivered >= self._length:
                data += await self._tee.eof()  # a counted body is whole: on disk before sent
            if self._tee.too_large:
                raise OverCap(self._tee.problem)
            await self._send(self._conn.encode(data))
        tail = await self._tee.eof()
        if self._tee.too_large:
            raise OverCap(self._tee.problem)
        await self._send(self._conn.encode(tail) + self._conn.encode_end())

    async def _whole(self, head: list[tuple[bytes, bytes]], close: bool) -> None:
        """A plain reply being recorded is held (at most the record cap) until it is recorded or
        refused: over the cap, the client gets the proxy's `payload_too_large` error instead,
        as an in-process caller gets `PayloadTooLarge`, and no SDK retries the paid request."""
        held: list[bytes] = []
        if self._length is not None and not self._tee.decodes and self._tee.over_cap(self._length):
            pass  # refused on its declared length, before reading it
        else:
            async for chunk in self._response.aiter_raw():
                self._delivered += len(chunk)
                held.append(await self._tee.feed(chunk))
                if self._tee.too_large:
                    break
            else:
                held.append(await self._tee.eof())
        if self._tee.too_large:
            answer = answers.payload_too_large(self._tee.problem)
            if not self._conn.gone:
                try:
                    await self._conn.answer(
                        answer.status, answer.all_headers(), answer.body, close=close
                    )
                except ClientGone:
                    self.client_left()
            return
        body = b"".join(held)
        if self._tee.decodes and len(body) <= WHOLE_BODY_MAX:  # as a replay frames it
            head = [*head, (b"content-length", str(len(body)).encode())]
        await self._send(self._conn.encode_head(self._response.status_code, head, close=close))
        await self._send(self._conn.encode(body) + self._conn.encode_end())

    async def _send(self, data: bytes) -> None:
        if self._conn.gone:
            return
        try:
            await self._conn.send(data)
        except ClientGone:
            self.client_left()


class Tee:
    """Feeds a live reply to a `Recording` and runs its commit on a worker thread.

    The commit is one LMDB write transaction; running it off the event loop keeps an fsync from
    stalling every other connection, and a thread is never abandoned mid-commit.
    """

    def __init__(
        self,
        plan: Live,
        canonical: Canonical,
        response: httpx.Response,
        started: float,
        cap: int,
        health: RecordingHealth,
    ) -> None:
        self._commit = plan.sink
        self.health = health
        self.wanted = plan.sink is not None
        self._pending: list[Reply] = []
        self._recording: Recording | None = None
        if self._commit is not None:
            self._recording = Recording(
                canonical,
                response.status_code,
                list(response.headers.multi_items()),
                Callbacks(self._pending.append, cap=cap),
                started,
            )
        self._cap = cap
        self.committed = False
        self.problem = ""
        self.too_large = False  # refused for the record cap: the client gets an error

    @property
    def decodes(self) -> bool:
        """Whether the reply is compressed and recorded decoded (and so relayed decoded)."""
        return self._recording is not None and self._recording.decodes

    def over_cap(self, size: int) -> bool:
        """Refuse the recording if `size` bytes of reply are over the cap; True if so."""
        if self._cap and size > self._cap and self._recording is not None:
            self.problem = str(PayloadTooLarge(size, self._cap, "reply")).split(";")[0]
            self.too_large = True
            self._recording.abandon()
        return self.too_large

    async def feed(self, chunk: bytes) -> bytes:
        """Record one raw chunk; returns it as the client gets it (decoded when recorded so).
        Frames past the cap are handed to the store at once, which refuses them."""
        recording = self._recording
        if recording is None:
            return chunk
        data = recording.feed(chunk)
        await self._flush()
        return data

    async def eof(self) -> bytes:
        """The reply ended; returns what a decoder held back."""
        if self._recording is None:
            return b""
        tail = self._recording.eof()
        await self._flush()
        return tail

    async def _flush(self) -> None:
        while self._pending:
            reply = self._pending.pop(0)
            try:
                # Cancellation waits for the thread: a started commit always finishes.
                await anyio.to_thread.run_sync(self._run_commit, reply)
            except (Exception, RecordRefused) as caught:  # the client still gets its reply
                exc = caught.error if isinstance(caught, RecordRefused) else caught
                if isinstance(exc, StoreError):
                    self.health.failed(exc)  # one warning per condition, not per exchange
                elif not isinstance(exc, PyrulaError):
                    logger.exception("pyrula proxy: recording an exchange failed")
                self.problem = (str(exc).splitlines() or [type(exc).__name__])[0]
                if isinstance(exc, PayloadTooLarge):
                    self.too_large, self.problem = True, self.problem.split(";")[0]
                assert self._recording is not None
                self._recording.abandon()
                return

    def _run_commit(self, reply: Reply) -> None:
        assert self._commit is not None
        self._commit.complete(reply)
        self.committed = True
        self.health.recovered()

    def close(self) -> None:
        """The exchange is over: whatever was not committed is dropped."""
        if self._recording is not None and not self._recording.finished:
            self._recording.abandon()


class OverCap(Exception):
    """A stream being recorded went over the record cap: it is cut short, unrecorded."""
