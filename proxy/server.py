"""The proxy server: accept connections, serve each on its own task, shut down gracefully.

Shutdown (SIGINT/SIGTERM, or `shutdown()`) stops accepting, closes idle keep-alive connections,
and lets exchanges in flight finish for up to `Limits.grace_s`; what is still running then is
cancelled, and its recording dropped. Every record is one LMDB transaction, committed on a worker
thread that cancellation waits for, so no record is ever half-written.
"""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import anyio.abc

from pyrula.journal.store import Store, is_url, open_store

from . import answers
from .config import ProxyConfig
from .errors import ConfigError, ProxyError
from .exchange import Handler
from .log import banner, logger
from .sessions import Sessions
from .upstream import Upstream
from .wire import BadRequest, ClientGone, Head, ServerConnection

_ACCEPT_RETRY_S = 0.1


class ProxyServer:
    """One proxy: `await serve()` runs it until `shutdown()` (or a signal, with `run`)."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.routes = config.route_table()
        self.port = config.port
        self._draining = False
        self._connections: set[ServerConnection] = set()
        self._busy = 0
        self._accepting: anyio.CancelScope | None = None
        self._quiet: anyio.Event | None = None
        self._cut: anyio.CancelScope | None = None
        limits = config.limits
        # Open sockets in all (bounds file descriptors): serving ones plus pending ones.
        self._sockets = anyio.Semaphore(limits.max_connections + limits.max_pending_connections)
        self._slots = anyio.Semaphore(limits.max_connections)  # taken once a head is accepted
        # Connections whose first head has not been accepted yet, oldest first.
        self._pending: dict[ServerConnection, anyio.CancelScope] = {}

    @property
    def url(self) -> str:
        host = self.config.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    @property
    def draining(self) -> bool:
        return self._draining

    async def serve(
        self,
        *,
        handle_signals: bool = False,
        task_status: anyio.abc.TaskStatus[ProxyServer] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen, report ready through `task_status`, and serve until shut down.

        With `handle_signals`, SIGINT and SIGTERM shut down gracefully (a second one at once).
        """
        store = self._open_store()
        try:
            listener = await anyio.create_tcp_listener(
                local_host=self.config.host, local_port=self.config.port, backlog=1024
            )
        except OSError as exc:
            raise ProxyError(
                f"cannot listen on {self.config.host}:{self.config.port}: {exc.strerror or exc}; "
                "pick another --listen port"
            ) from exc
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self._quiet = anyio.Event()
        upstream = None
        if not self.config.offline:  # replay mode never builds a client, let alone connects
            upstream = Upstream(self.config.limits, ca_file=self.config.upstream_ca)
        sessions = Sessions(store, self.config.cassette_mode)
        handler = Handler(
            self.config, self.routes, sessions, upstream, draining=lambda: self._draining
        )
        try:
            async with anyio.create_task_group() as connections:
                self._cut = connections.cancel_scope
                if handle_signals:
                    connections.start_soon(self._watch_signals)
                logger.info(banner(self.config, self.url, self.routes))
                task_status.started(self)
                with anyio.CancelScope() as self._accepting:
                    if self._draining:  # shut down before it ever started accepting
                        self._accepting.cancel()
                    async with anyio.create_task_group() as accepting:
                        for each in listener.listeners:  # one per address the host resolves to
                            accepting.start_soon(self._accept, each, connections, handler)
                await listener.aclose()
                await self._drain()
                connections.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()
                if upstream is not None:
                    await upstream.aclose()
            logger.info("pyrula proxy stopped")

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                if self._draining:
                    name = signal.Signals(signum).name
                    logger.warning("pyrula proxy: second %s; stopping now", name)
                    self.cut()
                else:
                    self.shutdown()

    def _open_store(self) -> Store | None:
        if not self.config.journaled:
            return None
        if is_url(self.config.store):
            return open_store(self.config.store, create=not self.config.offline)
        path = Path(self.config.store)
        if self.config.offline and not (path / "data.mdb").exists():
            raise ConfigError(
                f"no store at {path}: replay mode only reads recordings; record some first "
                "(pyrula proxy --mode record or --mode auto) or point --store at a store"
            )
        return open_store(path)

    async def _accept(
        self,
        listener: anyio.abc.Listener[anyio.abc.SocketStream],
        connections: anyio.abc.TaskGroup,
        handler: Handler,
    ) -> None:
        assert isinstance(listener, anyio.abc.SocketListener)
        accept = listener.accept
        while True:
            await self._sockets.acquire()
            try:
                stream = await accept()
            except OSError as exc:  # out of file descriptors and the like: wait, don't die
                self._sockets.release()
                logger.warning("pyrula proxy: accept failed (%s); retrying", exc)
                await anyio.sleep(_ACCEPT_RETRY_S)
                continue
            except BaseException:
                self._sockets.release()
                raise
            connections.start_soon(self._connection, stream, handler)

    async def _connection(self, stream: anyio.abc.SocketStream, handler: Handler) -> None:
        conn = ServerConnection(stream, self.config.limits)
        self._connections.add(conn)
        slotted = False
        try:
            head = await self._first_head(conn, handler)
            if head is not None:
                await self._slots.acquire()
                slotted = True
                await self._serve_connection(conn, handler, head)
        except ClientGone:
            pass
        except Exception:  # one broken connection must never take the server down with it
            logger.exception("pyrula proxy: a connection failed")
        finally:
            self._pending.pop(conn, None)
            self._connections.discard(conn)
            if slotted:
                self._slots.release()
            self._sockets.release()
            self._check_quiet()
            await conn.aclose()

    async def _first_head(self, conn: ServerConnection, handler: Handler) -> Head | None:
        """A new connection's first head, while it counts as pending: None when it was turned
        away (closed, timed out, evicted for a newer one, or refused by the token check)."""
        if len(self._pending) >= self.config.limits.max_pending_connections:
            oldest = next(iter(self._pending))
            self._pending.pop(oldest).cancel()  # it closes; this one takes its place
        with anyio.CancelScope() as scope:
            self._pending[conn] = scope
            head = await self._head(conn, handler)
            self._pending.pop(conn, None)
            return head
        self._pending.pop(conn, None)
        return None  # evicted: the connection just closes

    async def _head(self, conn: ServerConnection, handler: Handler) -> Head | None:
        """The next request head, if it passes the token check (else answered, and None)."""
        try:
            head = await conn.next_head()
        except BadRequest as exc:
            if conn.can_answer:
                answer = answers.bad_request(str(exc), exc.status)
                await conn.answer(answer.status, answer.all_headers(), answer.body, close=True)
            return None
        if head is not None and not handler.authorized(head.headers):
            # Checked on the head: the body is never read, no slot or upstream is taken.
            answer = answers.unauthorized()
            await conn.answer(answer.status, answer.all_headers(), answer.body, close=True)
            return None
        return head

    async def _serve_connection(
        self, conn: ServerConnection, handler: Handler, head: Head | None
    ) -> None:
        while not self._draining:  # after shutdown, a connection takes no new request
            if head is None:
                head = await self._head(conn, handler)
                if head is None:
                    return
            try:
                request = await conn.read_body(head)
            except BadRequest as exc:
                if conn.can_answer:
                    answer = answers.bad_request(str(exc), exc.status)
                    await conn.answer(answer.status, answer.all_headers(), answer.body, close=True)
                return
            head = None
            self._busy += 1
            try:
                if not await handler.handle(request, conn):
                    return
            finally:
                request.body.close()
                self._busy -= 1
                self._check_quiet()

    # -- shutting down -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop accepting, close idle connections, let in-flight exchanges finish (event loop)."""
        if self._draining:
            return
        self._draining = True
        logger.info("pyrula proxy: shutting down; waiting for exchanges in flight")
        if self._accepting is not None:
            self._accepting.cancel()
        for scope in list(self._pending.values()):  # no head yet: nothing in flight to finish
            scope.cancel()
        for conn in list(self._connections):
            if conn.idle_scope is not None:
                conn.idle_scope.cancel()
        self._check_quiet()

    def cut(self) -> None:
        """Stop at once: exchanges in flight are cancelled and their recordings dropped."""
        self.shutdown()
        if self._cut is not None:
            self._cut.cancel()

    async def _drain(self) -> None:
        assert self._quiet is not None
        with anyio.move_on_after(self.config.limits.grace_s) as scope:
            await self._quiet.wait()
        if scope.cancelled_caught and self._busy:
            logger.warning(
                "pyrula proxy: %d exchange(s) still running after %gs; dropping their recordings",
                self._busy,
                self.config.limits.grace_s,
            )

    def _check_quiet(self) -> None:
        if not self._draining or self._quiet is None:
            return
        for conn in list(self._connections):
            if conn.idle_scope is not None:
                conn.idle_scope.cancel()
        if not self._connections:
            self._quiet.set()


async def run(config: ProxyConfig) -> None:
    """Serve until SIGINT or SIGTERM (a second signal stops at once)."""
    await ProxyServer(config).serve(handle_signals=True)


__all__ = ["ProxyServer", "run"]
