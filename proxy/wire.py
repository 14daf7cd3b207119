"""One client connection, spoken through h11: read whole requests, write replies, keep-alive.

h11 does all the parsing and framing; this module only moves bytes between it and an anyio
stream, and enforces the limits (head size, body size, timeouts) that h11 leaves to its caller.
"""

from __future__ import annotations

import contextlib
import functools
import http
import math
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.abc
import h11

from .bodies import Body
from .config import Limits
from .headers import RawHeaders, first

# asyncio reads a socket 256 KiB at a time, and anyio does not pause an accepted socket until
# its receive queue first runs dry: reading less than that per call would let a fast uploader's
# queue grow without bound (a 30 MiB body piled up in memory before it reached the spool).
_READ_SIZE = 256 * 1024
_STREAM_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class ClientGone(Exception):
    """The client closed or broke the connection."""


class BadRequest(Exception):
    """The client sent something that is not an acceptable HTTP/1.1 request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status if 400 <= status < 500 else 400


@dataclass(frozen=True, slots=True)
class Head:
    """A request's line and headers, before its body is read (the token is checked on this)."""

    method: str
    target: bytes
    headers: RawHeaders  # h11 lower-cases the names
    http_version: bytes


@dataclass(frozen=True, slots=True)
class Incoming:
    """A whole request: head and body."""

    method: str
    target: bytes
    headers: RawHeaders  # h11 lower-cases the names
    body: bytes
    http_version: bytes


@dataclass(frozen=True, slots=True)
class Arrived:
    """A request whose body has arrived whole, spooled (`Body.load` gives its bytes)."""

    head: Head
    body: Body

    def loaded(self, body: bytes) -> Incoming:
        head = self.head
        return Incoming(head.method, head.target, head.headers, body, head.http_version)


class ServerConnection:
    """The server side of one HTTP/1.1 connection."""

    def __init__(self, stream: anyio.abc.ByteStream, limits: Limits) -> None:
        self._stream = stream
        self._limits = limits
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self._head_request = False
        self.idle_scope: anyio.CancelScope | None = None  # set while waiting between requests
        self.gone = False
        # A new connection must deliver its first request head within the head timeout of being
        # accepted; later ones, of their first byte (after waiting up to the idle timeout).
        self._fresh = True
        self._opened = anyio.current_time()

    # -- reading -----------------------------------------------------------------------------------

    async def next_head(self) -> Head | None:
        """The next request's head, read no further: None when the client closed (or idled out,
        or a new connection sent nothing within the head timeout) between requests.

        Raises `BadRequest` for a malformed, oversized or slow head (408 after the head timeout).
        """
        event = await self._head()
        if event is None:
            return None
        self._head_request = event.method == b"HEAD"
        # h11 bounds a head that arrives in pieces; one that arrives whole is measured here.
        size = (
            len(event.method)
            + len(event.target)
            + sum(4 + len(n) + len(v) for n, v in event.headers)
        )
        if size > self._limits.max_header_bytes:
            raise BadRequest(
                431,
                f"request head of about {size:,} bytes is over the proxy's limit of "
                f"{self._limits.max_header_bytes:,} (pyrula proxy --max-header-bytes)",
            )
        return Head(
            method=event.method.decode("ascii"),
            target=event.target,
            headers=list(event.headers),
            http_version=event.http_version,
        )

    async def read_body(self, head: Head) -> Arrived:
        """The body of the request whose head `next_head` returned, within the request timeout,
        spooled to a temporary file past `Limits.spool_bytes` (the caller closes it).

        Raises `BadRequest` (413) for a body over the limit, `ClientGone` if the client vanished.
        """
        deadline = anyio.current_time() + self._limits.request_timeout_s
        declared = first(head.headers, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_body:
            raise BadRequest(
                413,
                f"request body of {int(declared):,} bytes is over the proxy's limit of "
                f"{self._max_body:,} (pyrula proxy --max-body-bytes)",
            )
        body = Body(self._limits.spool_bytes)
        try:
            while True:
                part = await self._event(deadline)
                if isinstance(part, h11.Data):
                    body.write(part.data)
                    if body.size > self._max_body:
                        raise BadRequest(
                            413,
                            f"request body is over the proxy's limit of {self._max_body:,} "
                            "bytes (pyrula proxy --max-body-bytes)",
                        )
                elif isinstance(part, h11.EndOfMessage):
                    return Arrived(head, body)
                else:
                    raise BadRequest(400, f"unexpected {type(part).__name__} in a request body")
        except BaseException:
            body.close()
            raise

    @property
    def _max_body(self) -> int:
        limit: int = self._limits.max_body_bytes
        return limit

    async def _head(self) -> h11.Request | None:
        """The next request's head, within the head timeout."""
        fresh, self._fresh = self._fresh, False
        head_by = (self._opened if fresh else 0.0) + self._limits.head_timeout_s
        buffered, closed = self._h11.trailing_data
        if self._h11.their_state is h11.IDLE and not buffered and not closed:
            wait = head_by if fresh else anyio.current_time() + self._limits.idle_timeout_s
            data = await self._idle_receive(wait)
            if data is None:
                return None
            self._h11.receive_data(data)  # b"" (the client closed) reads as ConnectionClosed
        if not fresh:
            head_by += anyio.current_time()
        event = await self._event(head_by, "the request head did not arrive in time")
        if isinstance(event, h11.ConnectionClosed):
            return None
        if not isinstance(event, h11.Request):
            raise BadRequest(400, f"expected a request, got {type(event).__name__}")
        return event

    async def _idle_receive(self, deadline: float) -> bytes | None:
        """The first bytes of the next request; None if the deadline or shutdown came first."""
        with anyio.CancelScope(deadline=deadline) as scope:
            self.idle_scope = scope
            try:
                return await self._receive_raw()
            finally:
                self.idle_scope = None
        return None

    async def _event(
        self, deadline: float, late: str = "the request did not arrive in time"
    ) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise BadRequest(exc.error_status_hint, f"malformed HTTP request: {exc}") from exc
            if event is h11.NEED_DATA:
                if self._h11.they_are_waiting_for_100_continue:
                    await self._send(
                        self._h11.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
                remaining = deadline - anyio.current_time()
                data = b""
                with anyio.move_on_after(max(remaining, 0)) as scope:
                    data = await self._receive_raw()
                if scope.cancelled_caught:
                    raise BadRequest(408, late)
                self._h11.receive_data(data)
                continue
            if event is h11.PAUSED:
                raise BadRequest(400, "the connection cannot take another request now")
            assert isinstance(event, h11.Event)
            return event

    async def _receive_raw(self) -> bytes:
        try:
            return await self._stream.receive(_READ_SIZE)
        except anyio.EndOfStream:
            return b""
        except _STREAM_ERRORS as exc:
            self.gone = True
            raise ClientGone(str(exc)) from exc

    async def watch(self, on_gone: Callable[[], None]) -> None:
        """Read ahead while a reply is in flight, so a client that hangs up is noticed at once.

        Pipelined bytes are handed to h11, which keeps them for the next request.
        """
        budget = self._limits.max_header_bytes + self._limits.max_body_bytes
        while budget > 0:
            try:
                data = await self._stream.receive(_READ_SIZE)
            except (anyio.EndOfStream, *_STREAM_ERRORS):
                data = b""
            if not data:
                self.gone = True
                on_gone()
                return
            self._h11.receive_data(data)
            budget -= len(data)
        await anyio.sleep(math.inf)

    # -- writing -----------------------------------------------------------------------------------

    async def answer(
        self, status: int, headers: RawHeaders, body: bytes, *, close: bool = False
    ) -> None:
        """A whole reply in one write."""
        out = self.encode_head(status, headers, close=close)
        if body and not self._head_request:
            out += self.encode(body)
        out += self.encode_end()
        await self._send(out)

    def encode_head(self, status: int, headers: RawHeaders, *, close: bool = False) -> bytes:
        if close:
            headers = [*headers, (b"connection", b"close")]
        data = self._h11.send(
            h11.Response(status_code=status, headers=headers, reason=_reason(status))
        )
        assert data is not None
        return data

    def encode(self, chunk: bytes) -> bytes:
        """One body chunk, framed (chunked or counted, as the reply head decided)."""
        if not chunk or self._head_request:
            return b""
        data = self._h11.send(h11.Data(data=chunk))
        assert data is not None
        return data

    def encode_end(self) -> bytes:
        data = self._h11.send(h11.EndOfMessage())
        assert data is not None
        return data

    async def send(self, data: bytes) -> None:
        await self._send(data)

    async def _send(self, data: bytes) -> None:
        if not data:
            return
        try:
            await self._stream.send(data)
        except _STREAM_ERRORS as exc:
            self.gone = True
            raise ClientGone(str(exc)) from exc

    @property
    def can_answer(self) -> bool:
        """Whether no reply has been started yet (so an error reply can still be sent)."""
        return self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE)

    def next_cycle(self) -> bool:
        """After a whole reply: ready the connection for the next request, or say it must close."""
        if self.gone:
            return False
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            self._head_request = False
            return True
        return False

    async def aclose(self) -> None:
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(1),
            contextlib.suppress(*_STREAM_ERRORS),
        ):
            await self._stream.aclose()


@functools.cache
def _reason(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""
