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

import anyio
import anyio.to_thread
from pyrula.fingerprints import Canonical, RequestParts

from pyrula.errors import PyrulaError, ReplayMiss
from pyrula.journal.store import shown
from pyrula.transport.core import Live, Replay, header_bytes

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
from .relay import WHOLE_BODY_MAX, Hook, OverCap, Relay, Tee
from .routes import CONTROL_PREFIX, RouteTable, Target
from .sessions import Sessions
from .upstream import TIMEOUTS, UPSTREAM_ERRORS, Upstream
from .wire import Arrived, ClientGone, Incoming, ServerConnection

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
            if self._sessions.remote:  # its reads wait on a server: not on this loop
                plan, canonical = await anyio.to_thread.run_sync(
                    self._sessions.plan, namespace, parts
                )
            else:
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
        assert canonical is not None  # only a replay has none
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
                    "store": (shown(self._config.store) if self._config.journaled else None),
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
        head = [(k, v) for k, v in header_bytes(plan.headers) if k.lower() != b"content-length"]
        frames: Iterator[bytes] = iter(plan.frames)
        content_type = headers.first([(k.lower(), v) for k, v in head], b"content-type") or b""
        if b"event-stream" not in content_type:
            # A plain body is sent whole with its length when it is small (it nearly always is).
            gathered: list[bytes] = []
            size = 0
            for frame in frames:
                gathered.append(frame)
                size += len(frame)
                if size > WHOLE_BODY_MAX:
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
        tee = Tee(plan, canonical, response, started, self._record_cap, self._health)
        cut: Exception | None = None
        hook = Hook()
        try:
            # While the reply flows, a second task reads the client's side, so a client that
            # hangs up is noticed at once, even while the provider is silent.
            async with anyio.create_task_group() as group:
                relay = Relay(conn, response, tee, group.cancel_scope)
                hook.target = relay.client_left
                group.start_soon(conn.watch, hook)
                try:
                    await relay.run(close)
                except UPSTREAM_ERRORS as exc:
                    cut = exc  # kept out of the task group, which would wrap it in a group
                except OverCap as exc:
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
            if isinstance(cut, OverCap):  # a stream: its head is out, so it ends cut short
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


def _path(target: bytes) -> str:
    return target.split(b"?", 1)[0].decode("latin-1")[:200]
