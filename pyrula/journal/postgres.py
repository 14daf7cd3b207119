"""The PostgreSQL store: the same named tables as LMDB, on a server many hosts share.

`Store("postgresql://user@host/db")` opens one. Every write transaction first takes
transaction-scoped advisory locks (`pg_sql.begin_write`): a write scoped to named runs excludes
the writes of those runs, an unscoped one every write, so every layer above (which reads,
decides and writes inside one transaction) keeps LMDB's guarantees. A fact is committed (the
server's `synchronous_commit`) before `write` returns. A write is one pipelined batch (`BEGIN`,
its token and locks, its statements, `COMMIT`) plus a round trip for each answer its body waits
for; fenced puts (`PgTxn.put_fenced`) are kept and sent as one multi-row statement, answered
with the commit. A write of fenced puts only (`fenced_only`: a group of the worker's facts) is
the lock and that statement, committed as the implicit transaction of its one batch.

A lost connection is retried with backoff for `PYRULA_PG_RETRY_SECONDS` (default 60). A commit
whose outcome was lost with the connection is settled by its token: each write inserts a random
token in the same transaction, so after reconnecting the token says whether it committed, and
the write is neither lost nor applied twice. Before that read, the lost session's server
process is ended (it may not have noticed the loss, its batch still waiting for a lock), so it
cannot commit after the read. The store's sessions set
`idle_in_transaction_session_timeout` (`pg_txn.session_options`), so a host cut off in the middle
of a transaction holds its locks for seconds, not hours, and `statement_timeout`: a statement
that waits on the server past it (behind a lock held elsewhere) is cancelled, its write rolled
back whole, and the caller gets `StatementTimeout` rather than a retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from pyrula.errors import (
    MissingExtra,
    NotAStore,
    StoreError,
    StoreFormatError,
    StoreNotFound,
    StoreUnavailable,
)
from pyrula.journal.pg_schema import MAGIC, MIGRATIONS, SCHEMA_VERSION, table
from pyrula.journal.pg_sql import SCAN_BATCH, WRITE_LOCK, begin_write
from pyrula.journal.pg_txn import PgTxn, retry_seconds, session_options, timed_out
from pyrula.journal.store_base import (
    DATABASES,
    Location,
    Store,
    Txn,
    default_location,
    display,
    record_cap,
)
from pyrula.journal.wakeups import Wakeups

_not_installed: ImportError | None = None
try:
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # the extra is not installed
    psycopg = None  # type: ignore[assignment]
    _not_installed = exc

T = TypeVar("T")
STORE_FORMAT = 1
_TOKEN_TTL = "1 hour"


class PostgresStore(Store):
    """A journal store in a PostgreSQL database (its `pyrula_*` tables)."""

    def __init__(
        self,
        location: Location | None = None,
        *,
        create: bool = True,
        readonly: bool = False,
        sync: bool = True,
        max_record_bytes: int | None = None,
        map_size: int = 0,
        max_event_payload_bytes: int | None = None,
        pool_size: int | None = None,
        migrate: bool = False,
        metasync: bool = True,
    ) -> None:
        """`sync`, `metasync` and `map_size` are LMDB's, accepted so one call opens either
        backend, and change nothing here: a commit is flushed as the server's
        `synchronous_commit` says (docs/scaling.md, "What holds")."""
        if psycopg is None:
            raise MissingExtra(
                "a postgresql:// store",
                "postgres",
                (_not_installed.name if _not_installed else None,),
                needs="psycopg 3 and its pool",
            ) from _not_installed
        self.url = os.fspath(location) if location is not None else default_location()
        self.location = display(self.url)
        self.readonly = readonly
        self.max_record_bytes = record_cap(max_record_bytes, max_event_payload_bytes)
        self._closed = False
        self._writes = 0
        self._wakeups: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Wakeups] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        # A lost connection, or a session the server ended for idling in a transaction (its
        # transaction was rolled back): retried on a fresh one.
        self.retryable = (
            psycopg.OperationalError,
            psycopg.InterfaceError,
            psycopg.errors.IdleInTransactionSessionTimeout,
        )
        self.remote = True
        # Each session's server process and its start, to end it once its connection is lost
        # (`_end_lost_session`); the start tells it from a later process given the same pid.
        self._sessions: dict[int, Any] = {}
        size = pool_size or int(os.environ.get("PYRULA_PG_POOL_SIZE", "8"))
        self.pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=max(size, 1),
            kwargs={"autocommit": True, **session_options(self.url)},
            configure=self._note_session,
            open=False,
            name="pyrula",
        )
        try:
            self.pool.open(wait=True, timeout=retry_seconds() or 5.0)
        except Exception as exc:
            self.pool.close()
            raise StoreUnavailable(
                f"could not connect to {self.location} ({exc}); check the URL and that the "
                "server is running"
            ) from exc
        try:
            self.schema = self._check(create=create and not readonly, migrate=migrate)
        except BaseException:
            self.pool.close()
            raise
        for name in DATABASES:
            setattr(self, f"{name}_db", name)

    # -- opening ---------------------------------------------------------------------------------

    def _check(self, *, create: bool, migrate: bool) -> int:
        """Refuse a database that is not a Pyrula store or is newer; initialise an empty one
        only when it will be written. Returns the schema version."""
        with self.pool.connection() as conn:
            exists = conn.execute("SELECT to_regclass('pyrula_meta')").fetchone()
            if exists is None or exists[0] is None:
                if not create:
                    raise StoreNotFound(
                        self.location,
                        "check the URL (--store, PYRULA_STORE), or run `pyrula store migrate "
                        "URL` to initialise it; nothing is created where nothing would be written",
                    )
                return self._migrate(conn)
            rows: dict[bytes, bytes] = dict(conn.execute("SELECT k, v FROM pyrula_meta").fetchall())
        if rows.get(b"magic") != MAGIC:
            raise NotAStore(f"{self.location} has a pyrula_meta table Pyrula did not write")
        schema = int(rows.get(b"schema", b"0"))
        if schema > SCHEMA_VERSION:
            raise StoreFormatError(
                f"{self.location} has store schema {schema}, newer than this Pyrula reads "
                f"(up to {SCHEMA_VERSION}); upgrade pyrula to use it"
            )
        if schema < SCHEMA_VERSION:
            if not migrate:
                raise StoreFormatError(
                    f"{self.location} has store schema {schema}; this Pyrula needs "
                    f"{SCHEMA_VERSION}: run `pyrula store migrate {self.location}`"
                )
            with self.pool.connection() as conn:
                return self._migrate(conn)
        return schema

    def _migrate(self, conn: Any) -> int:
        """Apply every migration past the database's schema, in one transaction."""
        with conn.transaction():
            # A migration may wait for every writer to finish and rebuild a large table: not
            # bounded by the store's statement_timeout (for this transaction only).
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute(f"SELECT {WRITE_LOCK}")
            conn.execute(MIGRATIONS[0][0])  # pyrula_meta, so the version can be read
            found = conn.execute("SELECT v FROM pyrula_meta WHERE k = 'schema'::bytea").fetchone()
            current = int(found[0]) if found else 0
            for statements in MIGRATIONS[current:]:
                for statement in statements:
                    conn.execute(statement)
            put = (
                "INSERT INTO pyrula_meta (k, v) VALUES (%b, %b) "
                "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
            )
            conn.execute(
                put.replace("DO UPDATE SET v = EXCLUDED.v", "DO NOTHING"), (b"magic", MAGIC)
            )
            conn.execute(
                put.replace("DO UPDATE SET v = EXCLUDED.v", "DO NOTHING"),
                (b"format", str(STORE_FORMAT).encode()),
            )
            conn.execute(put, (b"schema", str(SCHEMA_VERSION).encode()))
        return SCHEMA_VERSION

    # -- the interface ---------------------------------------------------------------------

    @property
    def backend(self) -> str:
        return "postgresql"

    @property
    def closed(self) -> bool:
        return self._closed

    def db(self, name: str) -> Any:
        table(name)
        return name

    def wakeups(self) -> Wakeups:
        """One listening connection per event loop (created on first use, in that loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._wakeups.get(loop)
            if found is None:
                found = self._wakeups[loop] = Wakeups(self.url)
        return found

    def write(
        self,
        fn: Callable[[Txn], T],
        *,
        scope: Sequence[str] | None = None,
        fenced_only: bool = False,
    ) -> T:
        """Run `fn` in one serialised transaction and commit it; retry a lost connection.

        `fn` may run more than once (after a lost connection), so it must only touch the
        transaction. `fenced_only`: `fn` only keeps fenced puts (`Txn.put_fenced`, their
        answers read after the commit); the write is then sent after `fn` returns, without
        BEGIN and COMMIT, as the one implicit transaction of its batch."""
        if self.readonly:
            raise StoreError(f"{self.location} was opened read-only")
        token = os.urandom(16)
        deadline = time.monotonic() + retry_seconds()
        delay = 0.05
        names = sorted(set(scope)) if scope is not None else None
        begin = (begin_write(names), (token, *(names or ())))
        if fenced_only:  # no token: its fenced puts' rows say whether it committed
            begin = (begin_write(names, token=False), tuple(names or ()))
        while True:
            done = False
            pid = 0
            txn: PgTxn | None = None
            try:
                with self.pool.connection() as conn:
                    pid = conn.info.backend_pid
                    # One batch: BEGIN, the token and the locks, the body's statements, its
                    # fenced puts and COMMIT; a body that waits for no answer (a fenced put's
                    # is read after the commit) costs one round trip. Fenced only: the token
                    # and locks and the fenced puts, committed by the batch's Sync.
                    try:
                        with conn.pipeline() as pipeline:
                            txn = PgTxn(conn, pipeline, kept_only=fenced_only)
                            if fenced_only:
                                result = fn(txn)  # nothing sent yet: a raise leaves nothing
                                txn.kept_only = False
                                txn.cur.execute(*begin)
                                txn.send()
                            else:
                                txn.cur.execute("BEGIN")
                                txn.cur.execute(*begin)
                                result = fn(txn)
                                txn.send()
                                txn.cur.execute("COMMIT")
                            done = True
                    except psycopg.errors.QueryCanceled as exc:
                        # Its statement_timeout: the transaction was aborted by the server,
                        # nothing of it kept; the caller is told, not left to wait again.
                        _rollback(conn)
                        raise timed_out(self.location, exc) from exc
                    except self.retryable:
                        raise
                    except BaseException:
                        _rollback(conn)
                        raise
                    txn.collect()
                    self._sweep_tokens(conn)
                    return result
            except self.retryable as exc:
                # A lost or closed connection (a server restart): retry on a fresh one. A
                # write whose commit was sent is settled: by its token, or (fenced only) by the
                # rows its fenced puts wrote, each then added or not, never both.
                if done and txn is not None:
                    self._end_lost_session(pid, deadline)
                    if fenced_only or self._committed(token, deadline):
                        txn.settle(self)
                        return result
                if time.monotonic() + delay > deadline:
                    raise StoreUnavailable(
                        f"{self.location} stayed unreachable ({exc}); nothing of this write was "
                        "kept: start the server (or raise PYRULA_PG_RETRY_SECONDS) and resume"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _note_session(self, conn: Any) -> None:
        """The pool's hook for a new connection: note its server process and when it began."""
        row = conn.execute(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
        if row is not None:
            self._sessions[int(row[0])] = row[1]
            while len(self._sessions) > 8 * max(self.pool.max_size, 1):  # closed since: forget
                self._sessions.pop(next(iter(self._sessions)))

    def _end_lost_session(self, pid: int, deadline: float) -> None:
        """End the server process of a session whose connection was lost with a batch sent.

        The server may not have noticed the loss: a batch still waiting there (for a lock) runs
        and commits when it gets it, after its outcome was read back as "not written", and the
        retry would then write it again. Once the process has exited, whatever it did not
        commit is rolled back, so the read that follows sees the batch's final outcome. A
        process gone already (a server restart) is not looked for again."""
        started = self._sessions.pop(pid, None)
        if started is not None:  # unreachable until the deadline: a restart ends every session
            self._ask(
                "SELECT pg_terminate_backend(pid, %s) FROM pg_stat_activity "
                "WHERE pid = %s AND backend_start = %s",
                (_TERMINATE_WAIT_MS, pid, started),
                deadline,
                unbounded=True,
            )

    def _committed(self, token: bytes, deadline: float) -> bool:
        """Whether the write that inserted `token` committed (its outcome was lost)."""
        rows = self._ask("SELECT 1 FROM pyrula_commits WHERE token = %b", (token,), deadline)
        return bool(rows)

    def _ask(
        self, sql: str, params: tuple[Any, ...], deadline: float, *, unbounded: bool = False
    ) -> list[Any] | None:
        """The rows of one statement on a fresh connection, retried with backoff while the
        server is unreachable; None once the deadline has passed. `unbounded`: a deliberate
        wait (for a process to exit), not cut short by the store's statement_timeout."""
        delay = 0.05
        while True:
            try:
                with self.pool.connection() as conn:
                    if not unbounded:
                        rows: list[Any] = conn.execute(sql, params).fetchall()
                        return rows
                    with conn.transaction():
                        conn.execute("SET LOCAL statement_timeout = 0")
                        rows = conn.execute(sql, params).fetchall()
                    return rows
            except psycopg.OperationalError:
                if time.monotonic() + delay > deadline:
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _sweep_tokens(self, conn: Any) -> None:
        """Forget commit tokens old enough that no retry can still ask about them."""
        with self._lock:
            self._writes += 1
            due = self._writes % 1000 == 0
        if due:  # past the commit: a sweep cut short by statement_timeout is left to the next
            with contextlib.suppress(psycopg.errors.QueryCanceled):
                conn.execute(
                    f"DELETE FROM pyrula_commits WHERE at < now() - interval '{_TOKEN_TTL}'"
                )

    @contextmanager
    def read(self) -> Iterator[PgTxn]:  # type: ignore[override]
        """Reads, each statement on its own (autocommit: one round trip, no BEGIN/COMMIT).

        What the layers above read together is either one statement (a record, a scan) or
        immutable once written (request parts, frame pages), so no wider snapshot is needed. A
        statement that meets a lost connection is retried on a fresh one."""
        try:
            conn = self.pool.getconn()
        except psycopg.OperationalError as exc:  # no connection within the pool's timeout
            raise StoreUnavailable(
                f"{self.location} is unreachable ({exc}); start the server and retry"
            ) from exc
        txn = PgTxn(conn, None, store=self)
        try:
            yield txn
        finally:
            self.pool.putconn(txn.conn)

    def reconnect(self, conn: Any, exc: BaseException, deadline: float, delay: float) -> Any:
        """Give back a connection that failed a read and take another, after `delay`; raise
        `StoreUnavailable` past the deadline."""
        if time.monotonic() + delay > deadline:  # `conn` is then given back by `read`
            raise StoreUnavailable(
                f"{self.location} stayed unreachable ({exc}); start the server and retry"
            ) from exc
        self.pool.putconn(conn)
        time.sleep(delay)
        return self.pool.getconn()

    def iter_prefix(
        self, db: Any, prefix: bytes, *, after: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """As on LMDB, but each batch is read whole before it is yielded: a caller that reads or
        writes while it iterates must not hold a second connection of the pool."""
        start = None if after is None or after < prefix else after + b"\x00"
        while True:
            with self.read() as txn:
                rows = list(itertools.islice(txn.scan(db, prefix, start=start), SCAN_BATCH))
            yield from rows
            if len(rows) < SCAN_BATCH:
                return
            start = bytes(rows[-1][0]) + b"\x00"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.pool.close()

    def stat(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        with self.read() as txn:
            for name in DATABASES:
                counts[name] = txn.count(name)
            size = txn._query("SELECT pg_database_size(current_database())", ()).fetchone()
        return {
            "path": self.location,
            "backend": "postgresql",
            "format": STORE_FORMAT,
            "schema": self.schema,
            "map_size": 0,
            "file_bytes": int(size[0]) if size else 0,
            "entries": counts,
        }


# How long `_end_lost_session` waits for the lost session's process to exit.
_TERMINATE_WAIT_MS = 30_000


def _rollback(conn: Any) -> None:
    """End a write transaction its body (or the server) refused: nothing of it is kept."""
    with contextlib.suppress(Exception):
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
