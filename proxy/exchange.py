"""One exchange through the proxy: check, route, plan, then replay or forward (teeing the reply).

Planning is the in-process transports' own: `Sessions` hands the request to a `Cassette`, which
answers `Replay` (the recorded status, headers and frames) or `Live` (send it; record into
its `sink` when set). A live reply reaches the client chunk by chunk as the provider sends it,
while a `Recording` collects the same chunks and commits them at the provider's terminal frame.
"""

from __future__ import annotations

import hmac
import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
from pyrula.fingerprints import Canonical, RequestParts

from pyrula.errors import PayloadTooLarge, PyrulaError, RecordRefused, ReplayMiss, StoreError
from pyrula.journal.recorder import Reply
from pyrula.transport.core import Callbacks, Live, Recording, Replay

from . import answers, headers
from .answers import Answer
from .bodies import ByteBudget
from .config import CASSETTE_RULE, ProxyConfig, valid_cassette
from .log import (
    ABANDONED,
    CONTROL,
    FAILED,
    HIT,
    LIVE,
    MISS,
    RECORDED,
    REFUSED,
    UNRECORDED,
    Outcome,
    RecordingHealth,
    log_exchange,
    logger,
)
from .routes import CONTROL_PREFIX, RouteTable, Target
from .sessions import Sessions
from .upstream import TIMEOUTS, UPSTREAM_ERRORS, Upstream
from .wire import Arrived, ClientGone, Incoming, ServerConnection

# A recorded plain body up to this size is replayed with a Content-Length; larger, or a stream,
# goes out chunked as its frames come off the store.
_WHOLE_BODY_MAX = 1 << 20
# Replayed frames are gathered into writes of about this size: one syscall per page, not per frame.
_WRITE_BATCH = 64 * 1024


class Handler:
    """Serves requests for one proxy; shared by all its connections."""

    def __init__(
        self,
        config: ProxyConfig,
        routes: RouteTable,
        sessions: Sessions,
        upstream: Upstream | None,
        *,
        draining: Callable[[], bool],
    ) -> None:
        self._config = config
        self._routes = routes
        self._sessions = sessions
        self._upstream = upstream
        self._draining = draining
        self._token = config.token.encode() if config.token else None
        store = sessions.store
        self._record_cap = store.max_record_bytes if store is not None else 0
        self._health = RecordingHealth()
        self._budget = ByteBudget(config.limits.max_buffered_bytes)

    async def handle(self, arrived: Arrived, conn: ServerConnection) -> bool:
        """Serve one request; True if the connection may take another.

        A spooled body is loaded once the byte budget has room for it, and held until the
        exchange is over (the recording keeps the request until it commits)."""
        if not arrived.body.spooled:
            return await self._handle(arrived.loaded(await arrived.body.load()), conn)
        async with self._budget.hold(arrived.body.size):
            return await self._handle_spooled(arrived, conn)

    async def _handle_spooled(self, arrived: Arrived, conn: ServerConnection) -> bool:
        body = await arrived.body.load()
        arrived.body.close()  # the temporary file is no longer needed
        return await self._handle(arrived.loaded(body), conn)

    async def _handle(self, request: Incoming, conn: ServerConnection) -> bool:
        started = time.perf_counter()
        outcome = Outcome(REFUSED, 0, request.method, _path(request.target))
        close = self._draining()
        try:
            answer = await self._serve(request, conn, outcome, close)
            if answer is not None:
                outcome.status = answer.status
                await conn.answer(
                    answer.status, answer.all_headers(), answer.body, close=close or answer.close
                )
        except ClientGone:
            if outcome.kind not in (RECORDED, UNRECORDED, REFUSED):
                outcome.kind = ABANDONED
            outcome.detail = outcome.detail or "the client closed the connection"
            return False
        except Exception as exc:  # a bug or a damaged store must cost one request, not the server
            logger.exception("pyrula proxy: %s %s failed", request.method, outcome.path)
            outcome.kind, outcome.detail = FAILED, f"{type(exc).__name__}: {exc}"
            if not conn.can_answer:
                return False  # the reply was under way: cutting the connection is all that's left
            answer = answers.internal(exc)
            outcome.status = answer.status
            await conn.answer(answer.status, answer.all_headers(), answer.body, close=True)
            return False
        finally:
            outcome.ms = (time.perf_counter() - started) * 1000
            log_exchange(outcome)
        return conn.next_cycle()

    # -- deciding ----------------------------------------------------------------------------------

    async def _serve(
        self, request: Incoming, conn: ServerConnection, outcome: Outcome, close: bool
    ) -> Answer | None:
        if request.target.startswith(CONTROL_PREFIX):
            outcome.kind = CONTROL
            return self._control(request)
        if not request.target.startswith(b"/"):
            return answers.error(
                400,
                "bad_request",
                "pyrula proxy is not an HTTP forward proxy: set the client's base URL to "
                "http://HOST:PORT/<provider> instead of configuring it as a proxy",
            )
        namespace = self._namespace(request.headers)
        if namespace is None:
            return answers.error(400, "bad_request", f"x-pyrula-cassette: {CASSETTE_RULE}")
        target = self._routes.resolve(request.target)
        if target is None:
            return answers.no_route(outcome.path, [p for p, _ in self._routes.describe()])
        outcome.provider, outcome.path = target.provider, target.path
        if self._sessions.mode is not None:
            outcome.namespace = namespace
        forwarded = headers.upstream_request(request.headers)
        if self._sessions.mode is not None:
            forwarded = headers.decodable_encodings(forwarded)
        parts = RequestParts(request.method, target.url, headers.joined(forwarded), request.body)
        try:
            plan, canonical = self._sessions.plan(namespace, parts)
        except ReplayMiss as miss:
            outcome.kind = MISS
            outcome.detail = f"nearest {miss.nearest[:12]}" if miss.nearest else "nothing close"
            return answers.replay_miss(miss)
        if isinstance(plan, Replay):
            outcome.kind, outcome.status = HIT, plan.status
            await self._replay(conn, plan, close)
            return None
        if self._upstream is None:  # replay mode never builds a client; a Live plan is a bug
            raise PyrulaError("replay mode planned a live call")
        await self._forward(conn, request, target, forwarded, plan, canonical, close, outcome)
        return None

    def authorized(self, raw: headers.RawHeaders) -> bool:
        """Whether a request head carries the proxy's token (always, when it has none)."""
        if self._token is None:
            return True
        presented = headers.first(raw, b"proxy-authorization")
        if presented is not None:
            scheme, _, value = presented.strip().partition(b" ")
            presented = value.strip() if scheme.lower() == b"bearer" else None
        else:
            presented = headers.first(raw, headers.TOKEN_HEADER)
        return presented is not None and hmac.compare_digest(presented, self._token)

    def _namespace(self, raw: headers.RawHeaders) -> str | None:
        value = headers.first(raw, headers.CASSETTE_HEADER)
        if value is None:
            return self._config.cassette
        name = headers.text(value).strip()
        return name if valid_cassette(name) else None

    def _control(self, request: Incoming) -> Answer:
        path = _path(request.target)
        if path == "/_pyrula/health" and request.method in ("GET", "HEAD"):
            return answers.ok(
                {
                    "status": "ok",
                    "mode": self._config.mode,
                    "cassette": self._config.cassette,
                    "store": (
                        str(Path(self._config.store).resolve()) if self._config.journaled else None
                    ),
                    "routes": dict(self._routes.describe()),
                    "draining": self._draining(),
                    "request_bodies": self._budget.describe(),
                }
            )
        if path == "/_pyrula/reset" and request.method == "POST":
            raw = headers.first(request.headers, headers.CASSETTE_HEADER)
            namespace = headers.text(raw).strip() if raw is not None else None
            return answers.ok({"reset": self._sessions.reset(namespace)})
        return answers.error(
            404,
            "no_route",
            f"pyrula proxy has no endpoint {request.method} {path}; it has "
            "GET /_pyrula/health and POST /_pyrula/reset",
        )

    # -- replaying ---------------------------------------------------------------------------------

    async def _replay(self, conn: ServerConnection, plan: Replay, close: bool) -> None:
        # The proxy frames the body itself (a length, or chunks): a recorded length is dropped.
        head = [(k, v) for k, v in headers.encode(plan.headers) if k.lower() != b"content-length"]
        frames: Iterator[bytes] = iter(plan.frames)
        content_type = headers.first([(k.lower(), v) for k, v in head], b"content-type") or b""
        if b"event-stream" not in content_type:
            # A plain body is sent whole with its length when it is small (it nearly always is).
            gathered: list[bytes] = []
            size = 0
            for frame in frames:
                gathered.append(frame)
                size += len(frame)
                if size > _WHOLE_BODY_MAX:
                    break
            else:
                body = b"".join(gathered)
                length = (b"content-length", str(len(body)).encode())
                await conn.answer(plan.status, [*head, length], body, close=close)
                return
            frames = itertools.chain(gathered, frames)
        # Each recorded frame goes out as its own chunk, so a streaming client sees the stream
        # as it was recorded. `fast` gathers the chunks into writes of about a store page;
        # `recorded` writes each one at the time it arrived while recording.
        await conn.send(conn.encode_head(plan.status, head, close=close))
        pace = plan.frame_ms if self._config.replay_timing == "recorded" else None
        started = anyio.current_time()
        batch = bytearray()
        for index, frame in enumerate(frames):
            if pace is not None and index < len(pace):
                if batch:
                    await conn.send(bytes(batch))
                    batch.clear()
                await anyio.sleep_until(started + pace[index] / 1000)
            if frame:
                batch += conn.encode(frame)
            if len(batch) >= _WRITE_BATCH or pace is not None:
                await conn.send(bytes(batch))
                batch.clear()
        await conn.send(bytes(batch) + conn.encode_end())

    # -- forwarding --------------------------------------------------------------------------------

    async def _forward(
        self,
        conn: ServerConnection,
        request: Incoming,
        target: Target,
        forwarded: headers.RawHeaders,
        plan: Live,
        canonical: Canonical,
        close: bool,
        outcome: Outcome,
    ) -> None:
        assert self._upstream is not None
        started = time.perf_counter()
        try:
            response = await self._upstream.open(
                request.method, target.url, forwarded, request.body
            )
        except UPSTREAM_ERRORS as exc:
            timeout = isinstance(exc, TIMEOUTS)
            outcome.kind, outcome.detail = FAILED, f"{type(exc).__name__}: {exc}"
            answer = answers.upstream_failed(target.url.split("?")[0], exc, timeout=timeout)
            outcome.status = answer.status
            await conn.answer(answer.status, answer.all_headers(), answer.body, close=close)
            return
        outcome.status = response.status_code
        outcome.kind = LIVE
        tee = _Tee(plan, canonical, response, started, self._record_cap, self._health)
        cut: Exception | None = None
        hook = _Hook()
        try:
            # While the reply flows, a second task reads the client's side, so a client that
            # hangs up is noticed at once, even while the provider is silent.
            async with anyio.create_task_group() as group:
                relay = _Relay(conn, response, tee, group.cancel_scope)
                hook.target = relay.client_left
                group.start_soon(conn.watch, hook)
                try:
                    await relay.run(close)
                except UPSTREAM_ERRORS as exc:
                    cut = exc  # kept out of the task group, which would wrap it in a group
                except _OverCap as exc:
                    cut = exc
                group.cancel_scope.cancel()
        finally:
            hook.target = None
            tee.close()
            with anyio.CancelScope(shield=True):
                await response.aclose()
            if tee.wanted:
                outcome.kind = RECORDED if tee.committed else UNRECORDED
                if not tee.committed:
                    outcome.detail = tee.problem or "the reply never completed"
        if tee.too_large:
            # The record cap's one rule (docs/proxy.md): the caller gets an error, not retried.
            outcome.kind, outcome.detail = REFUSED, tee.problem
            if isinstance(cut, _OverCap):  # a stream: its head is out, so it ends cut short
                raise ClientGone(f"stream cut: {tee.problem}") from cut
            outcome.status = answers.PAYLOAD_TOO_LARGE
            return
        if cut is not None:
            # The reply was under way: the client sees a cut connection, nothing is recorded.
            outcome.kind, outcome.detail = FAILED, f"reply cut: {type(cut).__name__}: {cut}"
            raise ClientGone(outcome.detail) from cut
        if conn.gone:
            outcome.kind = RECORDED if tee.committed else ABANDONED
            raise ClientGone("the client closed the connection before the reply was whole")


# After the client hangs up, a reply whose terminal frame was already recorded is read on for
# this long, to keep what trails it (OpenAI's `data: [DONE]`) in the record.
_TAIL_S = 2.0


class _Hook:
    """The client watcher's way back to the relay, cut when the exchange ends. The cancelled
    watcher's traceback lives on in a reference cycle until the garbage collector runs; through
    the relay it would keep the request (its whole body) and the reply alive with it."""

    __slots__ = ("target",)

    def __init__(self) -> None:
        self.target: Callable[[], None] | None = None

    def __call__(self) -> None:
        if self.target is not None:
            self.target()


class _Relay:
    """Copies an upstream reply to the client chunk by chunk, through the tee."""

    def __init__(
        self,
        conn: ServerConnection,
        response: httpx.Response,
        tee: _Tee,
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
                raise _OverCap(self._tee.problem)
            await self._send(self._conn.encode(data))
        tail = await self._tee.eof()
        if self._tee.too_large:
            raise _OverCap(self._tee.problem)
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
        if self._tee.decodes and len(body) <= _WHOLE_BODY_MAX:  # as a replay frames it
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


class _Tee:
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


class _OverCap(Exception):
    """A stream being recorded went over the record cap: it is cut short, unrecorded."""


def _path(target: bytes) -> str:
    return target.split(b"?", 1)[0].decode("latin-1")[:200]
