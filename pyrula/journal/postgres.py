"""The PostgreSQL store: the same named tables as LMDB, on a server many hosts share.

`Store("postgresql://user@host/db")` opens one. Every write transaction first takes
transaction-scoped advisory locks (`pg_sql.begin_write`): a write scoped to named runs excludes
the writes of those runs, an unscoped one every write, so every layer above (which reads,
decides and writes inside one transaction) keeps LMDB's guarantees. A fact is committed (the
server's `synchronous_commit`) before `write` returns. Fenced puts (`PgTxn.put_fenced`) are
kept and sent as one multi-row statement when their answers are first asked for.

A lost connection is retried with backoff for `PYRULA_PG_RETRY_SECONDS` (default 60). A commit
whose outcome was lost with the connection is settled by its token: each write inserts a random
token in the same transaction, so after reconnecting the token says whether it committed, and
the write is neither lost nor applied twice.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from pyrula.errors import (
    NotAStore,
    StoreError,
    StoreFormatError,
    StoreNotFound,
    StoreUnavailable,
)
from pyrula.journal.pg_schema import MAGIC, MIGRATIONS, SCHEMA_VERSION, table
from pyrula.journal.pg_sql import SCAN_BATCH, SQL, WRITE_LOCK, begin_write, fenced_sql
from pyrula.journal.store import (
    DATABASES,
    Fence,
    Location,
    Store,
    Txn,
    default_location,
    display,
    prefix_end,
    record_cap,
)
from pyrula.journal.wakeups import CHANNEL, Wakeups

try:
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError:  # pragma: no cover - the extra is not installed
    psycopg = None  # type: ignore[assignment]

T = TypeVar("T")
STORE_FORMAT = 1
_TOKEN_TTL = "1 hour"


def retry_seconds() -> float:
    value = os.environ.get("PYRULA_PG_RETRY_SECONDS", "60")
    try:
        return float(value)
    except ValueError:
        raise StoreError(f"PYRULA_PG_RETRY_SECONDS={value!r} is not a number of seconds") from None


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
            raise StoreError(
                "a postgresql:// store needs psycopg 3 and its pool: pip install 'pyrula[postgres]'"
            )
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
        self.retryable = (psycopg.OperationalError, psycopg.InterfaceError)
        self.remote = True
        size = pool_size or int(os.environ.get("PYRULA_PG_POOL_SIZE", "8"))
        self.pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=max(size, 1),
            kwargs={"autocommit": True},
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

    def write(self, fn: Callable[[Txn], T], *, scope: Sequence[str] | None = None) -> T:
        """Run `fn` in one serialised transaction and commit it; retry a lost connection.

        `fn` may run more than once (after a lost connection), so it must only touch the
        transaction."""
        if self.readonly:
            raise StoreError(f"{self.location} was opened read-only")
        token = os.urandom(16)
        deadline = time.monotonic() + retry_seconds()
        delay = 0.05
        while True:
            done = False
            try:
                with self.pool.connection() as conn:
                    # Pipelined: BEGIN, the lock and the first read go in one round trip, the
                    # last write and COMMIT in another.
                    with conn.pipeline() as pipeline, conn.transaction():
                        names = sorted(set(scope)) if scope is not None else None
                        conn.execute(begin_write(names), (token, *(names or ())))
                        txn = PgTxn(conn, pipeline)
                        result = fn(txn)
                        txn.flush()  # fenced puts whose answers nobody asked for
                        done = True
                    self._sweep_tokens(conn)
                    return result
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                # A lost or closed connection (a server restart): retry on a fresh one.
                if done and self._committed(token, deadline):
                    return result
                if time.monotonic() + delay > deadline:
                    raise StoreUnavailable(
                        f"{self.location} stayed unreachable ({exc}); nothing of this write was "
                        "kept: start the server (or raise PYRULA_PG_RETRY_SECONDS) and resume"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _committed(self, token: bytes, deadline: float) -> bool:
        """Whether the write that inserted `token` committed (its outcome was lost)."""
        delay = 0.05
        while True:
            try:
                with self.pool.connection() as conn:
                    row = conn.execute(
                        "SELECT 1 FROM pyrula_commits WHERE token = %b", (token,)
                    ).fetchone()
                    return row is not None
            except psycopg.OperationalError:
                if time.monotonic() + delay > deadline:
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _sweep_tokens(self, conn: Any) -> None:
        """Forget commit tokens old enough that no retry can still ask about them."""
        with self._lock:
            self._writes += 1
            due = self._writes % 1000 == 0
        if due:
            conn.execute(f"DELETE FROM pyrula_commits WHERE at < now() - interval '{_TOKEN_TTL}'")

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
        self.pool.putconn(conn)
        if time.monotonic() + delay > deadline:
            raise StoreUnavailable(
                f"{self.location} stayed unreachable ({exc}); start the server and retry"
            ) from exc
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


@dataclass(slots=True)
class _FencedPut:
    """A `put_fenced` kept for the next multi-row statement, and (then) whether it was added."""

    key: bytes
    value: bytes
    db: str
    after: bytes | None
    fence: Fence | None
    also: tuple[tuple[bytes, bytes, Any], ...]
    added: bool = False


class PgTxn:
    """One transaction on a PostgreSQL store, behind the store's `Txn` interface: a pipelined
    write transaction, or (with `store`) autocommit reads retried on a lost connection."""

    __slots__ = ("conn", "cur", "fenced", "pipeline", "store", "woken")

    def __init__(self, conn: Any, pipeline: Any, *, store: PostgresStore | None = None) -> None:
        self.conn = conn
        self.cur = conn.cursor(binary=True)
        self.pipeline = pipeline
        self.store = store
        self.woken = False
        self.fenced: list[_FencedPut] = []

    def _query(self, sql: str, params: tuple[Any, ...]) -> Any:
        """Execute one statement; in a read, retry it on a fresh connection if this one is
        lost (an autocommit read is safe to repeat)."""
        if self.store is None:
            self.flush()
            return self.cur.execute(sql, params)
        deadline = time.monotonic() + retry_seconds()
        delay = 0.05
        while True:
            try:
                return self.cur.execute(sql, params)
            except psycopg.OperationalError as exc:
                self.conn = self.store.reconnect(self.conn, exc, deadline, delay)
                self.cur = self.conn.cursor(binary=True)
                delay = min(delay * 2, 2.0)

    def wake(self) -> None:
        self.flush()
        if not self.woken:
            self.woken = True
            self.cur.execute(f"NOTIFY {CHANNEL}")

    def put_fenced(
        self,
        key: bytes,
        value: bytes,
        *,
        db: str,
        after: bytes | None,
        fence: Fence | None,
        also: Sequence[tuple[bytes, bytes, Any]] = (),
    ) -> Callable[[], bool]:
        """Kept until an answer or another statement is asked for: then every fenced put kept
        goes out as one multi-row statement (per table and fence), in one round trip."""
        put = _FencedPut(key, value, db, after, fence, tuple(also))
        self.fenced.append(put)

        def added() -> bool:
            self.flush()
            return put.added

        return added

    def flush(self) -> None:
        """Send the fenced puts kept so far and learn which were added."""
        if not self.fenced:
            return
        puts, self.fenced = self.fenced, []
        kinds: dict[tuple[str, str | None, tuple[str, ...]], list[_FencedPut]] = {}
        for put in puts:
            kind = (put.db, put.fence[2] if put.fence else None, tuple(d for *_, d in put.also))
            kinds.setdefault(kind, []).append(put)
        for (db, fence_db, also_dbs), group in kinds.items():
            unique = {put.key: put for put in reversed(group)}  # a repeated key: the first only
            rows = list(reversed(unique.values()))
            columns: list[list[bytes | None]] = [
                [put.key for put in rows],
                [put.value for put in rows],
                [put.after for put in rows],
            ]
            if fence_db is not None:
                fences = [put.fence for put in rows if put.fence is not None]
                columns += [[f[0] for f in fences], [f[1] for f in fences]]
            for n in range(len(also_dbs)):
                columns += [[put.also[n][0] for put in rows], [put.also[n][1] for put in rows]]
            sql = fenced_sql(db, fence_db, also_dbs)
            added = {bytes(row[0]) for row in self.cur.execute(sql, columns).fetchall()}
            for put in rows:
                put.added = put.key in added

    def get(self, key: bytes, default: None = None, *, db: str) -> bytes | None:
        row = self._query(SQL[db]["get"], (key,)).fetchone()
        return row[0] if row is not None else default

    def get_many(self, keys: list[bytes], *, db: str) -> dict[bytes, bytes]:
        if not keys:
            return {}
        rows = self._query(SQL[db]["get_many"], (keys,)).fetchall()
        return {bytes(key): bytes(value) for key, value in rows}

    def put(self, key: bytes, value: bytes, *, db: str, overwrite: bool = True) -> bool:
        """Write `value` under `key`; True if written. An overwriting put is left in the
        pipeline (it always writes); `overwrite=False` waits to learn whether the key was new."""
        self.flush()
        if overwrite:
            self.cur.execute(SQL[db]["put"], (key, value))
            return True
        self.cur.execute(SQL[db]["add"], (key, value))
        return self._rowcount() > 0

    def delete(self, key: bytes, *, db: str) -> bool:
        self.flush()
        self.cur.execute(SQL[db]["delete"], (key,))
        return self._rowcount() > 0

    def _rowcount(self) -> int:
        if self.pipeline is not None:
            self.pipeline.sync()
        return int(self.cur.rowcount)

    def scan(
        self, db: str, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        # Read in batches of `SCAN_BATCH` keys, so a caller that stops early (a page of the
        # UI, the first match) never pulls the whole table over the connection.
        low = max(prefix, start or b"")
        end = prefix_end(prefix)
        while True:
            if end:
                rows = self._query(SQL[db]["range"], (low, end)).fetchall()
            else:
                rows = self._query(SQL[db]["from"], (low,)).fetchall()
            yield from rows
            if len(rows) < SCAN_BATCH:
                return
            low = bytes(rows[-1][0]) + b"\x00"

    def last(self, db: str, prefix: bytes) -> tuple[bytes, bytes] | None:
        end = prefix_end(prefix)
        if end:
            row = self._query(SQL[db]["last_below"], (prefix, end)).fetchone()
        else:
            row = self._query(SQL[db]["last"], (prefix,)).fetchone()
        return (row[0], row[1]) if row is not None else None

    def count(self, db: str) -> int:
        row = self._query(f"SELECT count(*) FROM {table(db)}", ()).fetchone()
        return int(row[0]) if row else 0
