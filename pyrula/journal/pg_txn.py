"""A transaction on a PostgreSQL store (`postgres.py`), behind the store's `Txn` interface.

A write transaction is pipelined: what it sends goes out without waiting for an answer until a
statement's answer is asked for (a read, whether a key was new), and its fenced puts
(`put_fenced`) are kept and sent as one multi-row statement per table and fence. The store sends
`BEGIN`, the commit token and locks, the body's statements, the fenced puts kept and `COMMIT` in
one batch, so a write whose body asks for no answer before its commit costs one round trip; the
fenced puts' answers are read from that batch's results after the commit (`collect`), or, when
the connection was lost and the commit token says it committed, from the rows they wrote
(`settle`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from pyrula.errors import StatementTimeout, StoreError
from pyrula.journal.pg_schema import table
from pyrula.journal.pg_sql import SCAN_BATCH, SQL, TRY_LOCK, fenced_sql
from pyrula.journal.store_base import Fence, Txn, prefix_end
from pyrula.journal.wakeups import CHANNEL

try:
    import psycopg
except ImportError:  # pragma: no cover - the extra is not installed
    psycopg = None  # type: ignore[assignment]


def retry_seconds() -> float:
    value = os.environ.get("PYRULA_PG_RETRY_SECONDS", "60")
    try:
        return float(value)
    except ValueError:
        raise StoreError(f"PYRULA_PG_RETRY_SECONDS={value!r} is not a number of seconds") from None


IDLE_SETTING = "idle_in_transaction_session_timeout"
STATEMENT_SETTING = "statement_timeout"
# Each session setting the store's own sessions carry: its variable, and its default in seconds.
SETTINGS = {
    IDLE_SETTING: ("PYRULA_PG_IDLE_IN_TRANSACTION_SECONDS", "5"),
    STATEMENT_SETTING: ("PYRULA_PG_STATEMENT_SECONDS", "60"),
}


def setting_seconds(setting: str) -> float:
    """The seconds the store's sessions set `setting` to (its variable, or its default); 0 or
    less leaves the server's."""
    variable, default = SETTINGS[setting]
    value = os.environ.get(variable, default)
    try:
        return float(value)
    except ValueError:
        raise StoreError(f"{variable}={value!r} is not a number of seconds") from None


def session_options(url: str) -> dict[str, str]:
    """The connection options of the store's own sessions: the URL's `options`, plus
    `idle_in_transaction_session_timeout` of `PYRULA_PG_IDLE_IN_TRANSACTION_SECONDS` (default 5)
    and `statement_timeout` of `PYRULA_PG_STATEMENT_SECONDS` (default 60), each unless the URL
    sets it (0 leaves the server's setting). A session cut off in the middle of a transaction
    then holds its locks that long, not until TCP keepalive notices (hours); a statement that
    waits on the server longer (behind a lock someone holds) is cancelled (`timed_out`)."""
    from psycopg.conninfo import conninfo_to_dict

    options = str(conninfo_to_dict(url).get("options") or "")
    more = [
        f"-c {setting}={max(round(seconds * 1000), 1)}"
        for setting in SETTINGS
        if (seconds := setting_seconds(setting)) > 0 and setting not in options
    ]
    if not more:
        return {}
    return {"options": " ".join([options, *more]).strip()}


def timed_out(location: str, exc: BaseException) -> StatementTimeout:
    """What a statement the server cancelled (`statement_timeout`) becomes for the caller."""
    return StatementTimeout(
        f"a statement on {location} waited on the server past its statement_timeout and was "
        f"cancelled ({str(exc).strip()}); nothing of it was kept (a write is rolled back whole). "
        "Something held a lock or a table it needed (see pg_locks and pg_stat_activity); raise "
        "PYRULA_PG_STATEMENT_SECONDS (default 60; 0 leaves the server's statement_timeout) or "
        "set it in the URL (options=-cstatement_timeout%3D120s), and retry"
    )


class Server(Protocol):
    """What a transaction asks of its store (`postgres.PostgresStore`, which builds on this
    module): a fresh connection for a lost one, and reads of its own."""

    location: str

    def reconnect(self, conn: Any, exc: BaseException, deadline: float, delay: float) -> Any: ...

    def read(self) -> AbstractContextManager[Txn]: ...


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

    __slots__ = ("conn", "cur", "fenced", "kept_only", "pipeline", "sent", "store", "woken")

    def __init__(
        self,
        conn: Any,
        pipeline: Any,
        *,
        store: Server | None = None,
        kept_only: bool = False,
    ) -> None:
        self.conn = conn
        # A `fenced_only` write's body: it may keep fenced puts, and nothing else.
        self.kept_only = kept_only
        self.cur = conn.cursor(binary=True)
        self.pipeline = pipeline
        self.store = store
        self.woken = False
        self.fenced: list[_FencedPut] = []
        # Fenced statements sent whose answers are not read yet: each its own cursor and rows.
        self.sent: list[tuple[Any, list[_FencedPut]]] = []

    def _query(self, sql: str, params: tuple[Any, ...]) -> Any:
        """Execute one statement; in a read, retry it on a fresh connection if this one is
        lost (an autocommit read is safe to repeat)."""
        if self.store is None:
            self._refuse_if_kept_only()
            # In a write, a read ends with a Sync rather than a Flush: the server then counts
            # the transaction idle while the body works on the answer, so that
            # `idle_in_transaction_session_timeout` can end it if the body never comes back.
            self.send()
            cursor = self.cur.execute(sql, params)
            self.pipeline.sync()
            return cursor
        deadline = time.monotonic() + retry_seconds()
        delay = 0.05
        while True:
            try:
                return self.cur.execute(sql, params)
            except psycopg.errors.QueryCanceled as exc:  # not a lost connection: not repeated
                raise timed_out(self.store.location, exc) from exc
            except psycopg.OperationalError as exc:
                self.conn = self.store.reconnect(self.conn, exc, deadline, delay)
                self.cur = self.conn.cursor(binary=True)
                delay = min(delay * 2, 2.0)

    def _refuse_if_kept_only(self) -> None:
        if self.kept_only:
            raise StoreError(
                "a fenced-only write may only keep fenced puts, and read their answers after "
                "its commit"
            )

    def wake(self) -> None:
        self._refuse_if_kept_only()
        self.send()
        if not self.woken:
            self.woken = True
            self.cur.execute(f"NOTIFY {CHANNEL}")

    def try_lock(self, names: list[str]) -> list[str]:
        if not names:
            return []
        rows = self._query(TRY_LOCK, (names,)).fetchall()
        return [name for (name,) in rows]

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
        """Kept until an answer or another statement is asked for, or the commit: then every
        fenced put kept goes out as one multi-row statement (per table and fence). Asked before
        the commit, the answer costs a round trip; after it, none (the commit's carried it)."""
        put = _FencedPut(key, value, db, after, fence, tuple(also))
        self.fenced.append(put)

        def added() -> bool:
            self.flush()
            return put.added

        return added

    def flush(self) -> None:
        """Send the fenced puts kept so far and learn which were added."""
        if self.fenced:
            self._refuse_if_kept_only()
        self.send()
        self.collect()

    def send(self) -> None:
        """Send the fenced puts kept so far, without waiting for their answers (`collect`)."""
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
            cursor = self.conn.cursor(binary=True)  # its own: the answer is read later
            cursor.execute(fenced_sql(db, fence_db, also_dbs), columns)
            self.sent.append((cursor, rows))

    def collect(self) -> None:
        """Read the answers of the fenced statements sent (a round trip if none came yet)."""
        while self.sent:  # each taken off once answered: `settle` reads back the others
            cursor, rows = self.sent[0]
            added = {bytes(row[0]) for row in cursor.fetchall()}
            for put in rows:
                put.added = put.key in added
            del self.sent[0]

    def settle(self, store: Server) -> None:
        """The answers of fenced puts whose commit was confirmed by its token after the
        connection was lost with their results: a put was added if its row holds its value."""
        sent, self.sent = self.sent, []
        by_db: dict[str, list[_FencedPut]] = {}
        for _, rows in sent:
            for put in rows:
                by_db.setdefault(put.db, []).append(put)
        with store.read() as txn:
            for db, puts in by_db.items():
                found = txn.get_many([put.key for put in puts], db=db)
                for put in puts:
                    put.added = found.get(put.key) == put.value

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
        self._refuse_if_kept_only()
        self.send()
        if overwrite:
            self.cur.execute(SQL[db]["put"], (key, value))
            return True
        self.cur.execute(SQL[db]["add"], (key, value))
        return self._rowcount() > 0

    def delete(self, key: bytes, *, db: str) -> bool:
        self._refuse_if_kept_only()
        self.send()
        self.cur.execute(SQL[db]["delete"], (key,))
        return self._rowcount() > 0

    def delete_many(self, keys: list[bytes], *, db: str) -> None:
        """One statement for all `keys`, left in the pipeline (no answer is waited for)."""
        if keys:
            self._refuse_if_kept_only()
            self.send()
            self.cur.execute(SQL[db]["delete_many"], (keys,))

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

    def keys(self, db: str, *, start: bytes = b"", limit: int) -> list[bytes]:
        if limit <= 0:
            return []
        rows = self._query(SQL[db]["keys"], (start, limit)).fetchall()
        return [bytes(key) for (key,) in rows]

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
