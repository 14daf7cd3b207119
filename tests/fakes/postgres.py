"""A real PostgreSQL for the store tests.

`PYRULA_TEST_POSTGRES_URL` when it is set; otherwise a throwaway server started from the
`pgserver` wheel (a real PostgreSQL 16, on a unix socket, in a temporary folder, stopped and
deleted when the process exits). Each test gets its own schema on it (`fresh_url`), so tests
running side by side never see each other's tables, and a store's write lock is per schema.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import psycopg

from pyrula.journal.pg_sql import NAME_LOCK, begin_write

with warnings.catch_warnings():
    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI containers); nothing to act on.
    warnings.simplefilter("ignore")
    # Imported with this module, not at a test's first server: pytester's in-process runs drop
    # modules first imported during a test, and pgserver's exit handler needs psutil.
    import pgserver
    import psutil  # noqa: F401

_lock = threading.Lock()
_servers: dict[str, Any] = {}


def server(name: str = "shared") -> Any:
    """The `pgserver` server called `name` in this process, started on first use."""
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = _servers.get(name)
        if found is None:
            folder = Path(tempfile.mkdtemp(prefix=f"pyrula-pg-{name}-"))
            found = pgserver.get_server(folder, cleanup_mode="delete")
            _servers[name] = found
        return found


def stop_servers() -> None:
    """Stop and delete the servers this process started. Called as the test session ends
    (tests/conftest.py), not left to pgserver's exit handler: pytest-xdist kills a worker whose
    exit takes more than 10 s, and on a loaded machine stopping several servers one after
    another (a checkpoint each, the last registered first) can, leaving the first, "shared",
    running."""
    with _lock:
        found = list(_servers.values())
        _servers.clear()
    for one in found:
        one.cleanup()  # pgserver's own: stop it, delete its folder, drop the exit handler


def server_url() -> str:
    """The URL of the test server (the environment's, or a throwaway one)."""
    given = os.environ.get("PYRULA_TEST_POSTGRES_URL")
    if given:
        return given
    return str(server().get_uri())


def fresh_url(base: str | None = None) -> str:
    """A URL whose tables live in a new, empty schema of the test server."""
    base = base or server_url()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}options=-csearch_path%3D{schema}"


def restart(name: str, *, how: str = "immediate", options: str | None = None) -> None:
    """Stop the server called `name` the hard way (as a crash would) and start it again;
    `options` (postgres's command line, as `pg_ctl -o` takes it) replace those it ran with."""
    from pgserver import pg_ctl
    from pgserver.utils import PostmasterInfo

    found = server(name)
    more = ["-l", str(found.log), "-o", options] if options is not None else []
    pg_ctl(["-w", "-m", how, *more, "restart"], pgdata=found.pgdata, user=found.system_user)
    # The new postmaster, so that pgserver stops it (not the old, dead one) when we exit.
    found._postmaster_info = PostmasterInfo.read_from_pgdata(found.pgdata)


class HeldStore:
    """Another session on a store's database that holds what the store's writers (or its
    readers of one table) must wait for, as a busy server would: a test then sees how many of
    the store's statements wait behind it on the server (`waiting`), and lets them go
    (`release`). Released on its own after `safety` seconds, so a blocked loop cannot hang the
    test (it then fails its assertions instead).

    With `scope` (a run id), the locks a write scoped to it takes (`pg_sql.begin_write`), held
    in an open transaction as that run's writer mid-write would: only that run's writes wait."""

    def __init__(
        self,
        url: str,
        *,
        table: str | None = None,
        scope: str | None = None,
        safety: float = 30.0,
    ) -> None:
        self.url = url
        self.conn = psycopg.connect(url, autocommit=True)
        self.table = table
        self.scope = scope
        self._released = threading.Event()
        if scope is not None:
            self.conn.execute("BEGIN")
            self.conn.execute(begin_write([scope], token=False), (scope,))
        elif table is None:  # the store's write lock, held exclusively: every write waits
            self.conn.execute(f"SELECT pg_advisory_lock({_STORE_LOCK})")
        else:  # the table itself: every read of it waits
            self.conn.execute("BEGIN")
            self.conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        self._timer = threading.Timer(safety, self.release)
        self._timer.daemon = True
        self._timer.start()

    def waiting(self) -> int:
        """How many statements of other sessions wait for what this one holds."""
        params: tuple[str, ...] = ()
        if self.table is None:
            key = _STORE_LOCK
            if self.scope is not None:
                key, params = _SCOPE_LOCK, (self.scope,)
            query = (
                "SELECT count(*) FROM pg_locks, "
                f"(SELECT {key}::bigint AS k) AS held WHERE locktype = 'advisory' "
                "AND NOT granted AND objsubid = 1 AND classid = ((k >> 32) & 4294967295)::oid "
                "AND objid = (k & 4294967295)::oid"
            )
        else:
            query = (
                "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND NOT granted "
                f"AND relation = '{self.table}'::regclass"
            )
        with psycopg.connect(self.url, autocommit=True) as look:
            row = look.execute(query, params).fetchone()
        return int(row[0]) if row else 0

    def release(self) -> None:
        """Let the waiting statements go (once)."""
        if self._released.is_set():
            return
        self._released.set()
        self._timer.cancel()
        if self.scope is not None:
            self.conn.execute("COMMIT")
        elif self.table is None:
            self.conn.execute(f"SELECT pg_advisory_unlock({_STORE_LOCK})")
        else:
            self.conn.execute("COMMIT")
        self.conn.close()


# The store's write lock (pyrula/journal/postgres.py): one per schema.
_STORE_LOCK = "hashtext('pyrula:' || current_schema())"
# The lock of one write scope (a run id) in it (`pg_sql.begin_write`).
_SCOPE_LOCK = NAME_LOCK.format("%s")


class Heartbeat:
    """A task on the running loop that counts its turns: it only ticks while the loop is free."""

    def __init__(self) -> None:
        self.ticks = 0
        self._task = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._task.cancel()


async def while_held(held: HeldStore, work: asyncio.Future[Any], waiters: int) -> tuple[int, int]:
    """Once `waiters` statements wait behind `held` (or `work` is done), how many wait, and how
    many times a heartbeat on this loop turned meanwhile; then let them go. The waits are
    looked at from threads, so a loop the store holds cannot answer at all."""
    beat = Heartbeat()
    give_up = time.monotonic() + 60.0  # a work that neither waits nor ends fails the test
    try:
        while not work.done() and await asyncio.to_thread(held.waiting) < waiters:
            if time.monotonic() > give_up:
                raise AssertionError("after 60 s nothing waits behind the hold; the work goes on")
        before = beat.ticks
        waiting = await asyncio.to_thread(held.waiting)
        return waiting, beat.ticks - before
    finally:
        held.release()
        beat.stop()


class WireTrace:
    """libpq's protocol trace of one connection while the block lasts: how many times the
    client waited on the server (`round_trips`: a message sent, then answers read) and which
    statements it sent (`statements`: their first words, prepared ones included)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._file = tempfile.NamedTemporaryFile("w+", suffix=".trace")  # noqa: SIM115

    def __enter__(self) -> WireTrace:
        from psycopg import pq

        self.conn.pgconn.trace(self._file.fileno())
        self.conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.conn.closed:
            self.conn.pgconn.untrace()

    def lines(self) -> list[list[str]]:
        self._file.seek(0)
        return [line.split("\t") for line in self._file.read().splitlines()]

    @property
    def round_trips(self) -> int:
        """The client's requests for answers: each `Sync`, and each `Flush` not sent with one
        (psycopg sends a `Flush` after a `Sync`, and alone to read a result in a pipeline)."""
        sent = [parts[2] for parts in self.lines() if len(parts) >= 3 and parts[0] == "F"]
        return sum(
            1
            for n, kind in enumerate(sent)
            if kind == "Sync" or (kind == "Flush" and (n == 0 or sent[n - 1] != "Sync"))
        )

    @property
    def statements(self) -> list[str]:
        named: dict[str, str] = {}
        found: list[str] = []
        for parts in self.lines():
            if len(parts) < 4 or parts[0] != "F":
                continue
            quoted = parts[3].split('"')
            if parts[2] == "Parse" and len(quoted) >= 4:
                named[quoted[1]] = (quoted[3].split() or ["?"])[0].upper()
            elif parts[2] == "Bind" and len(quoted) >= 4:
                found.append(named.get(quoted[3], "?"))
        return found
