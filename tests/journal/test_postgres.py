"""The store on PostgreSQL: the same interface as LMDB, a versioned schema, and facts that
survive a server restart exactly once."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from pyrula.errors import StoreError, StoreFormatError, StoreNotFound, StoreUnavailable
from pyrula.journal import Store
from pyrula.journal.group_commit import MISSED, _Write, commit_group
from pyrula.journal.pg_schema import SCHEMA_VERSION
from pyrula.journal.pg_txn import PgTxn
from pyrula.journal.store import display
from pyrula.runtime import RunStore
from pyrula.runtime.grouped_append import append_grouped
from tests.fakes.postgres import HeldStore, WireTrace, fresh_url, restart, server


def _tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() ORDER BY 1"
        ).fetchall()
    return [row[0] for row in rows]


def test_each_backend_keeps_keys_in_byte_order_with_prefix_scans(store_location):
    keys = [b"a\x00\x01", b"a\x00\xff", b"a\x01", b"a\xff\xff", b"b"]
    with Store(store_location) as store:
        events = store.db("events")
        store.write(lambda txn: [txn.put(k, k * 2, db=events) for k in reversed(keys)])
        added = store.write(lambda txn: txn.put(b"b", b"other", db=events, overwrite=False))
        removed = store.write(lambda txn: txn.delete(b"a\x01", db=events))
        with store.read() as txn:
            assert [k for k, _ in txn.scan(events)] == [k for k in keys if k != b"a\x01"]
            assert [k for k, _ in txn.scan(events, b"a\x00")] == [b"a\x00\x01", b"a\x00\xff"]
            assert [k for k, _ in txn.scan(events, b"a", start=b"a\x00\x02")] == [
                b"a\x00\xff",
                b"a\xff\xff",
            ]
            assert txn.last(events, b"a\x00") == (b"a\x00\xff", b"a\x00\xff" * 2)
            assert txn.last(events, b"a\xff") == (b"a\xff\xff", b"a\xff\xff" * 2)
            assert txn.last(events, b"c") is None
            assert txn.get(b"b", db=events) == b"bb"
    assert (added, removed) == (False, True)


def test_a_missing_store_is_not_created_where_nothing_will_be_written():
    url = fresh_url()
    with pytest.raises(StoreNotFound, match="pyrula store migrate"):
        Store(url, create=False)
    assert _tables(url) == []
    with Store(url) as store:
        assert store.stat()["schema"] == SCHEMA_VERSION
    assert "pyrula_events" in _tables(url)


def test_a_store_of_a_newer_schema_is_refused_and_left_unchanged():
    url = fresh_url()
    Store(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE pyrula_meta SET v = %s WHERE k = 'schema'::bytea", (b"99",))
    with pytest.raises(StoreFormatError, match="schema 99, newer than this Pyrula"):
        Store(url)
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT v FROM pyrula_meta WHERE k = 'schema'::bytea").fetchone()
    assert found is not None and bytes(found[0]) == b"99"


def test_an_older_schema_asks_for_migrate_and_migrate_brings_it_up():
    url = fresh_url()
    Store(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE pyrula_meta SET v = %s WHERE k = 'schema'::bytea", (b"0",))
    with pytest.raises(StoreFormatError, match="pyrula store migrate"):
        Store(url)
    Store(url, migrate=True).close()
    with Store(url) as store:
        assert store.stat()["schema"] == SCHEMA_VERSION


def test_a_schema_1_store_migrates_to_the_sent_index_and_keeps_what_it_held():
    url = fresh_url()
    with Store(url) as store:
        store.write(lambda txn: txn.put(b"k", b"v", db=store.db("events")))
    with psycopg.connect(url, autocommit=True) as conn:  # as schema 1 left it
        conn.execute("DROP TABLE pyrula_sent_index")
        conn.execute("UPDATE pyrula_meta SET v = %s WHERE k = 'schema'::bytea", (b"1",))
    with pytest.raises(StoreFormatError, match="schema 1; this Pyrula needs 2"):
        Store(url)
    Store(url, migrate=True).close()
    assert "pyrula_sent_index" in _tables(url)
    with Store(url) as store:
        assert store.stat()["schema"] == SCHEMA_VERSION == 2
        assert store.get(store.db("events"), b"k") == b"v"
        store.write(lambda txn: txn.put(b"s" * 32, b"f" * 32, db=store.db("sent_index")))


def test_lmdbs_flush_options_are_accepted_and_change_nothing():
    # One call opens either backend; on PostgreSQL the server decides how a commit is flushed.
    url = fresh_url()
    with Store(url, sync=False, metasync=False) as store:
        meta = store.db("meta")
        store.write(lambda txn: txn.put(b"k", b"v", db=meta))
    with Store(url) as store:
        assert store.get(store.db("meta"), b"k") == b"v"


def test_the_location_shown_never_carries_the_password():
    assert (
        display("postgresql://me:s3cret@db.internal/runs") == "postgresql://me:***@db.internal/runs"
    )
    assert display("postgresql://me@db/runs") == "postgresql://me@db/runs"


def test_facts_written_across_a_server_crash_are_kept_exactly_once(monkeypatch):
    monkeypatch.setenv("PYRULA_PG_RETRY_SECONDS", "60")
    url = fresh_url(str(server("restart").get_uri()))
    store = Store(url)
    runs = RunStore(store)
    run, _ = runs.submit("crash", {})
    acknowledged: list[int] = []
    failures: list[BaseException] = []
    halfway = threading.Event()

    def append() -> None:
        try:
            for index in range(200):
                event = runs.append(run.id, None, "step:done", {"index": index})
                acknowledged.append(event.seq)
                if index == 50:
                    halfway.set()
        except BaseException as exc:  # reported below
            failures.append(exc)
            halfway.set()

    writer = threading.Thread(target=append)
    writer.start()
    halfway.wait(60)
    restart("restart")
    writer.join(120)
    store.close()

    assert failures == []
    with Store(url) as reopened:
        events = RunStore(reopened).events(run.id)
    indexes = [event.payload["index"] for event in events if event.type == "step:done"]
    assert indexes == list(range(200))
    assert [event.seq for event in events if event.type == "step:done"] == acknowledged


def test_a_grouped_write_whose_connection_is_lost_is_retried_not_failed():
    # A worker's facts are group-committed; a connection lost under the group (a server
    # restart) must be retried like any write, never handed to the caller as its own failure.
    url = fresh_url()
    store = Store(url)
    flags = store.db("flags")
    tries: list[int] = []

    def write(txn):
        tries.append(txn.conn.info.backend_pid)
        if len(tries) == 1:  # the server drops this connection mid-transaction, once
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (tries[0],))
        txn.get(b"step", db=flags)
        txn.put(b"step", b"done", db=flags)
        return "kept"

    assert commit_group(store, [write]) == [(True, "kept")]
    assert len(tries) == 2 and tries[0] != tries[1]
    assert store.get(flags, b"step") == b"done"
    store.close()


def test_a_scoped_write_does_not_wait_for_an_open_write_of_another_scope():
    with Store(fresh_url()) as store:
        inside, release = threading.Event(), threading.Event()

        def hold(txn: object) -> None:  # a long write of run a, its transaction left open
            inside.set()
            release.wait(120)

        def put(txn):
            txn.put(b"b", b"written", db="flags")
            return b"b"

        holder = threading.Thread(target=store.write, args=(hold,), kwargs={"scope": ("a",)})
        holder.start()
        try:
            assert inside.wait(60)
            # Committed while run a's write is still open (an unscoped one would wait for it).
            with ThreadPoolExecutor(max_workers=1) as writer:
                assert writer.submit(store.write, put, scope=("b",)).result(60) == b"b"
            assert not release.is_set()
            assert store.get("flags", b"b") == b"written"
        finally:
            release.set()
            holder.join(60)


def test_grouped_facts_of_many_runs_across_a_server_crash_are_kept_exactly_once(monkeypatch):
    monkeypatch.setenv("PYRULA_PG_RETRY_SECONDS", "60")
    url = fresh_url(str(server("restart").get_uri()))
    store = Store(url)
    runs = RunStore(store)
    ids = [runs.submit("crash", {})[0].id for _ in range(4)]
    acknowledged: dict[str, list[int]] = {run_id: [] for run_id in ids}
    halfway = threading.Event()

    async def journal(run_id: str) -> None:
        seq = len(runs.events(run_id))
        for index in range(100):
            event = await append_grouped(
                runs, run_id, None, "step:done", {"index": index}, next_seq=seq + 1
            )
            seq = event.seq
            acknowledged[run_id].append(seq)
            if index == 30:
                halfway.set()

    async def main() -> None:
        await asyncio.gather(*(journal(run_id) for run_id in ids))

    writer = threading.Thread(target=asyncio.run, args=(main(),))
    writer.start()
    halfway.wait(60)
    restart("restart")
    writer.join(120)
    store.close()

    with Store(url) as reopened:
        for run_id in ids:
            events = RunStore(reopened).events(run_id)
            done = [event for event in events if event.type == "step:done"]
            assert [event.payload["index"] for event in done] == list(range(100))
            assert [event.seq for event in done] == acknowledged[run_id]


def _fenced(key: bytes, fence: bytes, traces: list[WireTrace] | None = None) -> _Write:
    """A grouped write of `key` fenced on the flag `lease` holding `fence`: its fast form a
    fenced put (whose first call starts tracing the connection), its full form a plain put."""

    def fast(txn):
        if traces is not None and not traces:
            traces.append(WireTrace(txn.conn).__enter__())
        added = txn.put_fenced(
            key, b"fast", db="events", after=None, fence=(b"lease", fence, "flags")
        )
        return lambda: "fast" if added() else MISSED

    def full(txn):
        txn.put(key, b"full", db="events")
        return "full"

    return _Write(full, fast, scope=key.decode())


def test_a_group_of_fenced_facts_costs_one_round_trip_with_its_commit():
    # The lock and the group's one fenced statement go out in one batch, committed by its
    # Sync (no BEGIN, no COMMIT); the answers are read after it (before: four round trips,
    # BEGIN and COMMIT among them).
    with Store(fresh_url()) as store:
        store.write(lambda txn: txn.put(b"lease", b"mine", db="flags"))
        traces: list[WireTrace] = []
        writes = [_fenced(f"k{n}".encode(), b"mine", traces) for n in range(4)]
        assert commit_group(store, writes) == [(True, "fast")] * 4
        traces[0].__exit__()
        # The lock (no commit token: the rows settle a lost outcome), the fenced statement.
        assert (traces[0].round_trips, traces[0].statements) == (1, ["SELECT", "WITH"])
        assert store.get("events", b"k3") == b"fast"

        # With a write that has no fast form, the group is one explicit transaction.
        def plain(txn):
            traces.append(WireTrace(txn.conn).__enter__())
            txn.put(b"plain", b"v", db="flags")

        outcomes = commit_group(store, [_fenced(b"k9", b"mine"), plain])
        assert outcomes == [(True, "fast"), (True, None)]
        traces[1].__exit__()
        assert (traces[1].round_trips, traces[1].statements) == (1, ["WITH", "INSERT", "COMMIT"])


def test_a_fenced_only_write_that_does_more_is_refused_and_writes_nothing():
    with Store(fresh_url()) as store:

        def more(txn):
            txn.put_fenced(b"k", b"v", db="events", after=None, fence=None)
            txn.put(b"other", b"v", db="flags")

        with pytest.raises(StoreError, match="fenced-only write may only keep fenced puts"):
            store.write(more, fenced_only=True)
        assert (store.get("events", b"k"), store.get("flags", b"other")) == (None, None)


def test_a_fenced_fact_that_missed_runs_its_full_write_once_the_group_committed():
    with Store(fresh_url()) as store:
        store.write(lambda txn: txn.put(b"lease", b"mine", db="flags"))
        writes = [_fenced(b"kept", b"mine"), _fenced(b"fenced-out", b"someone else's")]
        assert commit_group(store, writes) == [(True, "fast"), (True, "full")]
        assert store.get("events", b"kept") == b"fast"
        assert store.get("events", b"fenced-out") == b"full"
        # Two guesses about one claim in a group: answered before the commit, in it.
        twice = [_fenced(b"same", b"mine"), _fenced(b"same", b"mine")]
        assert commit_group(store, twice) == [(True, "fast"), (True, "full")]


def _tokens(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pyrula_commits").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("plain", [False, True], ids=["fenced-only", "with-a-plain-write"])
def test_fenced_answers_lost_with_the_connection_after_the_commit_are_read_back(monkeypatch, plain):
    # The commit went through but its answers did not come back. A fenced-only group has no
    # commit token (each fenced put's row says whether it was added); a group with another
    # write has one, which says it committed. Either way each answer is read from the row it
    # wrote, so no fact is written twice nor reported missed.
    collect = PgTxn.collect
    lost: list[bool] = []

    def collect_once(txn: PgTxn) -> None:
        if txn.sent and not lost:
            lost.append(True)
            raise psycopg.OperationalError("the connection was lost with the answers")
        collect(txn)

    monkeypatch.setattr(PgTxn, "collect", collect_once)
    url = fresh_url()
    with Store(url) as store:
        store.write(lambda txn: txn.put(b"lease", b"mine", db="flags"))
        tokens = _tokens(url)
        writes: list = [_fenced(b"a", b"mine"), _fenced(b"b", b"theirs")]
        if plain:
            writes.append(lambda txn: txn.put(b"plain", b"v", db="flags"))
        outcomes = commit_group(store, writes)
        assert outcomes[:2] == [(True, "fast"), (True, "full")]
        assert lost == [True]
        assert (store.get("events", b"a"), store.get("events", b"b")) == (b"fast", b"full")
        # The plain write's token, and the second transaction's (b's full write).
        assert _tokens(url) - tokens == (2 if plain else 1)


def _backend_gone(url: str, pid: int) -> bool:
    with psycopg.connect(url, autocommit=True) as admin:
        for _ in range(600):  # the server ends it after its timeout; bounded, not timed
            row = admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))
            if row.fetchone() is None:
                return True
            admin.execute("SELECT pg_sleep(0.05)")
    return False


def _idling_write(url: str, tries: list[int]):
    """A write whose first try reads, then idles inside its transaction until the server has
    ended its session; later tries write at once."""

    def write(txn):
        tries.append(txn.conn.info.backend_pid)
        txn.get(b"x", db="flags")
        if len(tries) == 1:
            assert _backend_gone(url, tries[0])
        txn.put(b"x", b"written", db="flags")
        return len(tries)

    return write


def test_the_store_sessions_end_a_transaction_left_idle(monkeypatch):
    monkeypatch.setenv("PYRULA_PG_IDLE_IN_TRANSACTION_SECONDS", "0.2")
    url = fresh_url()
    with Store(url) as store:
        with store.read() as txn:
            shown = txn._query("SHOW idle_in_transaction_session_timeout", ()).fetchone()
            path = txn._query("SELECT current_schema()", ()).fetchone()
        assert shown is not None and shown[0] == "200ms"
        assert path is not None and path[0] in url  # the URL's own options are kept
        tries: list[int] = []
        # Cut by the server: the lock is let go, and the write is retried on a fresh session.
        assert store.write(_idling_write(url, tries)) == 2
        assert tries[0] != tries[1]
        assert store.get("flags", b"x") == b"written"


def test_a_write_cut_for_idling_with_no_retry_left_is_refused_and_keeps_nothing(monkeypatch):
    monkeypatch.setenv("PYRULA_PG_IDLE_IN_TRANSACTION_SECONDS", "0.2")
    url = fresh_url()
    with Store(url) as store:
        monkeypatch.setenv("PYRULA_PG_RETRY_SECONDS", "0")
        with pytest.raises(StoreUnavailable, match="nothing of this write was kept"):
            store.write(_idling_write(url, []))
        assert store.get("flags", b"x") is None


def test_the_idle_timeout_can_be_set_by_the_url_or_turned_off(monkeypatch):
    base = fresh_url()
    url = base.replace("options=", "options=-cidle_in_transaction_session_timeout%3D7s%20")
    with Store(url) as store, store.read() as txn:
        assert txn._query("SHOW idle_in_transaction_session_timeout", ()).fetchone() == ("7s",)
    monkeypatch.setenv("PYRULA_PG_IDLE_IN_TRANSACTION_SECONDS", "0")
    with Store(base) as store, store.read() as txn:
        assert txn._query("SHOW idle_in_transaction_session_timeout", ()).fetchone() == ("0",)


def test_a_batch_still_waiting_on_the_server_after_its_connection_is_lost_is_not_applied_late():
    # The connection breaks while the batch waits on the server for a lock; the server has not
    # noticed (nothing is read from a waiting session). Read back at once, the batch is "not
    # written" and the write's full form is sent instead. Before: the old session then got the
    # lock and committed its batch too, so the fact was written twice (a, then b).
    url = fresh_url()
    with Store(url) as store:
        store.write(lambda txn: txn.put(b"lease", b"mine", db="flags"))
        connections: list[psycopg.Connection] = []
        full_sent = threading.Event()

        def fast(txn):
            connections.append(txn.conn)
            added = txn.put_fenced(
                b"a", b"fast", db="events", after=None, fence=(b"lease", b"mine", "flags")
            )
            return lambda: "fast" if added() else MISSED

        def full(txn):
            full_sent.set()
            txn.put(b"b", b"full", db="events")
            return "full"

        held = HeldStore(url)
        outcome: list = []
        writer = threading.Thread(
            target=lambda: outcome.extend(commit_group(store, [_Write(full, fast, scope="a")]))
        )
        writer.start()
        try:
            while held.waiting() < 1:  # the batch is on the server, behind the lock
                pass
            fd = connections[0].pgconn.socket
            with socket.socket(fileno=os.dup(fd)) as dropped:
                dropped.shutdown(socket.SHUT_RDWR)  # the network drops
            assert full_sent.wait(60)  # read back as not written: the full form goes instead
        finally:
            held.release()
            writer.join(120)
        assert outcome == [(True, "full")]
        assert (store.get("events", b"a"), store.get("events", b"b")) == (None, b"full")


def test_try_lock_takes_the_names_no_other_write_holds_without_waiting():
    url = fresh_url()
    with Store(url) as store:
        held = HeldStore(url, scope="a")  # run a's writer, mid-write
        try:
            with ThreadPoolExecutor(max_workers=1) as writer:
                found = writer.submit(
                    store.write, lambda txn: txn.try_lock(["c", "a", "b"]), scope=[]
                )
                # Answered while a is still held (waiting for it would give a too, at release).
                assert found.result(60) == ["c", "b"]
            assert held.waiting() == 0
        finally:
            held.release()


def test_a_group_of_facts_commits_beside_another_runs_open_write_and_waits_for_its_own():
    url = fresh_url()
    with Store(url) as store:
        store.write(lambda txn: txn.put(b"lease", b"mine", db="flags"))
        held = HeldStore(url, scope="run-a")
        try:
            other = _fenced(b"b1", b"mine")
            other.scope = "run-b"
            assert commit_group(store, [other]) == [(True, "fast")]  # no wait for run-a
            own = _fenced(b"a1", b"mine")
            own.scope = "run-a"
            with ThreadPoolExecutor(max_workers=1) as writer:
                pending = writer.submit(commit_group, store, [own])
                while held.waiting() == 0:  # it waits for run-a's writer, on the server
                    assert not pending.done()
                held.release()
                assert pending.result(60) == [(True, "fast")]
        finally:
            held.release()
