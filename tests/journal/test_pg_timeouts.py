"""The timeouts a PostgreSQL store sets on its own sessions: `statement_timeout` (a statement
that waits on the server past it is cancelled, and the caller told, nothing of the write kept)
beside `idle_in_transaction_session_timeout` (tests/journal/test_postgres.py)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from pyrula.errors import StatementTimeout, StoreUnavailable
from pyrula.journal import Store
from pyrula.journal.group_commit import MISSED, _Write, commit_group
from pyrula.journal.pg_schema import SCHEMA_VERSION
from tests.fakes.postgres import HeldStore, fresh_url


def _shown(store: Store, setting: str) -> str:
    with store.read() as txn:  # one of the store's pooled sessions
        row = txn._query(f"SHOW {setting}", ()).fetchone()
    assert row is not None
    return str(row[0])


def test_the_store_sessions_carry_a_statement_timeout_of_a_minute_by_default(monkeypatch):
    monkeypatch.delenv("PYRULA_PG_STATEMENT_SECONDS", raising=False)
    monkeypatch.delenv("PYRULA_PG_IDLE_IN_TRANSACTION_SECONDS", raising=False)
    with Store(fresh_url()) as store:
        assert _shown(store, "statement_timeout") == "1min"
        assert _shown(store, "idle_in_transaction_session_timeout") == "5s"
    monkeypatch.setenv("PYRULA_PG_STATEMENT_SECONDS", "2.5")
    with Store(fresh_url()) as store:
        assert _shown(store, "statement_timeout") == "2500ms"


def test_a_urls_own_statement_timeout_is_kept_and_0_leaves_the_servers(monkeypatch):
    monkeypatch.setenv("PYRULA_PG_STATEMENT_SECONDS", "30")
    base = fresh_url()
    url = base.replace("options=", "options=-cstatement_timeout%3D7s%20")
    with Store(url) as store:
        assert _shown(store, "statement_timeout") == "7s"
        assert _shown(store, "idle_in_transaction_session_timeout") == "5s"  # still set
        assert _shown(store, "search_path").startswith("t_")  # the URL's other option too
    with psycopg.connect(base, autocommit=True) as plain:
        row = plain.execute("SHOW statement_timeout").fetchone()
    server_setting = row[0] if row else None
    monkeypatch.setenv("PYRULA_PG_STATEMENT_SECONDS", "0")
    with Store(base) as store:
        assert _shown(store, "statement_timeout") == server_setting
    monkeypatch.setenv("PYRULA_PG_STATEMENT_SECONDS", "soon")
    with pytest.raises(Exception, match="PYRULA_PG_STATEMENT_SECONDS='soon' is not a number"):
        Store(base)


@pytest.fixture
def short(monkeypatch) -> str:
    """A store URL whose sessions cancel a statement after 0.3 s."""
    monkeypatch.setenv("PYRULA_PG_STATEMENT_SECONDS", "0.3")
    return fresh_url()


def test_a_write_held_past_the_timeout_by_a_table_lock_raises_and_writes_nothing(short):
    with Store(short) as store:
        store.write(lambda txn: txn.put(b"before", b"1", db="flags"))
        held = HeldStore(short, table="pyrula_flags")
        try:
            with pytest.raises(StatementTimeout) as raised:
                store.write(
                    lambda txn: (
                        txn.put(b"x", b"2", db="meta"),
                        txn.put(b"x", b"2", db="flags"),
                    )
                )
        finally:
            held.release()
        message = str(raised.value)
        assert "statement_timeout" in message and "PYRULA_PG_STATEMENT_SECONDS" in message
        assert "nothing of it was kept" in message
        assert isinstance(raised.value, StoreUnavailable)  # a worker leaves the run to resume
        # Neither of the transaction's writes is kept, and the store goes on.
        assert (store.get("meta", b"x"), store.get("flags", b"x")) == (None, None)
        store.write(lambda txn: txn.put(b"after", b"3", db="flags"))
        assert store.get("flags", b"after") == b"3"


def test_a_write_waiting_for_the_stores_lock_past_the_timeout_raises_and_writes_nothing(short):
    with Store(short) as store:
        held = HeldStore(short)  # the store's write lock: every write waits for it
        try:
            with pytest.raises(StatementTimeout):
                store.write(lambda txn: txn.put(b"x", b"1", db="flags"))
            with pytest.raises(StatementTimeout):  # a scoped write waits for it shared
                store.write(lambda txn: txn.put(b"y", b"1", db="flags"), scope=["run-1"])
        finally:
            held.release()
        assert (store.get("flags", b"x"), store.get("flags", b"y")) == (None, None)


def test_a_group_of_fenced_facts_held_past_the_timeout_raises_and_writes_nothing(short):
    # The worker's group commit (the lock and the fenced INSERT, one batch with no BEGIN):
    # not settled as a lost connection would be, nor retried, but refused.
    with Store(short) as store:
        store.write(lambda txn: txn.put(b"lease", b"mine", db="flags"))

        def fast(txn):
            added = txn.put_fenced(
                b"e1", b"fact", db="events", after=None, fence=(b"lease", b"mine", "flags")
            )
            return lambda: "fast" if added() else MISSED

        def full(txn):
            txn.put(b"e1", b"fact", db="events")
            return "full"

        held = HeldStore(short)
        try:
            with pytest.raises(StatementTimeout):
                commit_group(store, [_Write(full, fast, scope="e1")])
        finally:
            held.release()
        assert store.get("events", b"e1") is None


def test_a_read_held_past_the_timeout_raises_rather_than_repeating(short):
    with Store(short) as store:
        held = HeldStore(short, table="pyrula_flags")
        try:
            with pytest.raises(StatementTimeout):
                store.get("flags", b"x")
        finally:
            held.release()
        assert store.get("flags", b"x") is None


def test_the_wakeup_listener_outlives_the_statement_timeout(short):
    # The LISTEN connection waits on the server for as long as nothing is announced: it is
    # not one of the store's timed sessions, so the wait is never cut (no reconnect, which
    # would count one wake-up more).
    async def main(store: Store) -> tuple[int, int, bool]:
        wake = store.wakeups()
        await wake.start()
        seen = wake.count
        await asyncio.sleep(1.0)  # past the 0.3 s statement timeout, listening
        await asyncio.to_thread(store.write, lambda txn: txn.wake())
        woken = await wake.wait(seen, 30.0)
        return seen, wake.count, woken and wake.live

    with Store(short) as store:
        seen, count, live = asyncio.run(main(store))
    assert (count - seen, live) == (1, True)


def test_a_migration_waiting_for_every_writer_is_not_cut_by_the_timeout(short):
    # `pyrula store migrate` takes the store's lock, waiting for every write in flight, and may
    # rebuild a large table: neither is bounded by the store's statement_timeout.
    Store(short).close()
    with psycopg.connect(short, autocommit=True) as conn:
        conn.execute("UPDATE pyrula_meta SET v = %s WHERE k = 'schema'::bytea", (b"0",))
    held = HeldStore(short)  # a writer in flight: the migration waits for its lock
    with ThreadPoolExecutor(1) as pool:
        migrating = pool.submit(lambda: Store(short, migrate=True).close())
        try:
            give_up = time.monotonic() + 60
            while held.waiting() < 1 and not migrating.done() and time.monotonic() < give_up:
                pass
            assert held.waiting() == 1
            time.sleep(1.0)  # waiting past the 0.3 s the store's other statements get
        finally:
            held.release()
        migrating.result(60)  # raises if the migration was cancelled
    with Store(short) as store:
        assert store.stat()["schema"] == SCHEMA_VERSION
