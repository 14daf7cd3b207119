"""The PostgreSQL store's index plan at scale: on a store seeded with a million events, the
statements of a claim and of a run's events read use the primary key, and what they touch is
bounded by the rows they return, not by the table (docs/scaling.md, "Retention at scale").

The tables are filled in SQL (`generate_series`), with keys built as `event_key` builds them
(run id, 0x00, the sequence number as 8 big-endian bytes) and each run's events interleaved with
every other run's, as runs side by side append them. Each plan is the server's own: EXPLAIN
(ANALYZE, BUFFERS) of the exact statement the store runs (`pg_sql.SQL`), with its parameters,
and (PostgreSQL 16 and later) the generic plan a prepared statement may switch to.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pyrula.journal.pg_sql import SQL, fenced_sql
from pyrula.journal.store import Store, prefix_end
from pyrula.runtime.leases import lease_key, lease_value
from pyrula.runtime.records import event_key
from pyrula.runtime.run_leases import CLAIM_PAGE
from tests.fakes.postgres import fresh_url

pytestmark = pytest.mark.slow  # the seed takes about 10 s

RUNS = 100_000
EVENTS_PER_RUN = 10  # 1,000,000 events in all
QUEUED = 2_000  # every 50th run is in the queue

# A run's id as the seed builds it (and as SQL does below): run_ and 20 hex digits.
RUN_ID = "'run_' || lpad(to_hex({n}), 20, '0')"


def run_id(n: int) -> str:
    return f"run_{n:020x}"


@pytest.fixture(scope="module")
def seeded() -> Iterator[psycopg.Connection[Any]]:
    url = fresh_url()
    Store(url).close()  # the store's own schema, as `pyrula store migrate` makes it
    with psycopg.connect(url, autocommit=True) as conn:
        rid = RUN_ID.format(n="r")
        # Runs: a record each; every 50th still queued (and in the queue), the rest completed.
        conn.execute(
            "INSERT INTO pyrula_runs (k, v) SELECT convert_to(" + rid + ", 'UTF8'), "
            "convert_to(json_build_object('id', " + rid + ", 'name', 'work', 'input', r, "
            "'status', CASE WHEN r %% 50 = 0 THEN 'queued' ELSE 'completed' END, "
            "'created_at', 1.7e9 + r, 'updated_at', 1.7e9 + r, 'attempt', 1, 'lease', NULL, "
            "'result', r, 'capture', 'io', 'options', '{}'::json)::text, 'UTF8') "
            "FROM generate_series(1, %s) r",
            (RUNS,),
        )
        conn.execute(
            "INSERT INTO pyrula_queue (k, v) SELECT convert_to(" + rid + ", 'UTF8'), "
            "convert_to(json_build_object('input', r)::text, 'UTF8') "
            "FROM generate_series(50, %s, 50) r",
            (RUNS,),
        )
        # Events: `event_key(run, seq)`, seq by seq across all runs (each run's spread out).
        conn.execute(
            "INSERT INTO pyrula_events (k, v) SELECT "
            "convert_to(" + rid + ", 'UTF8') || '\\x00'::bytea || int8send(s::bigint), "
            "convert_to(json_build_object('seq', s, 'type', 'step:done', 'at', 1.7e9 + r, "
            "'payload', json_build_object('name', 'step' || s, 'result', r))::text, 'UTF8') "
            "FROM generate_series(1, %s) s, generate_series(1, %s) r ORDER BY s, r",
            (EVENTS_PER_RUN, RUNS),
        )
        # Flags: a lease for each queued run (as if all were running) and a cancel flag.
        conn.execute(
            "INSERT INTO pyrula_flags (k, v) SELECT convert_to(p || " + rid + ", 'UTF8'), "
            "'\\x01'::bytea FROM generate_series(50, %s, 50) r, "
            "unnest(ARRAY['lease:', 'cancel:']) p",
            (RUNS,),
        )
        conn.execute("ANALYZE pyrula_runs, pyrula_queue, pyrula_events, pyrula_flags")
        yield conn


def _plan(conn: psycopg.Connection[Any], sql: str, params: tuple[Any, ...]) -> dict[str, Any]:
    """The executed plan of `sql` with `params` (its top node, with actual rows and buffers)."""
    row = (
        conn.cursor(binary=True)
        .execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
        .fetchone()
    )
    assert row is not None
    found = row[0]
    return dict((json.loads(found) if isinstance(found, str | bytes) else found)[0]["Plan"])


def _generic(conn: psycopg.Connection[Any], sql: str) -> dict[str, Any]:
    """The generic plan of `sql` (its parameters unknown), as a prepared statement may use."""
    numbered = iter(range(1, 100))
    text = re.sub(r"%b", lambda _: f"${next(numbered)}", sql)
    row = conn.execute(f"EXPLAIN (GENERIC_PLAN, FORMAT JSON) {text}").fetchone()
    assert row is not None
    return dict(row[0][0]["Plan"])


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _scans(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Each scan of the plan: its kind (an index read backwards says so) and its index."""
    found = []
    for node in _nodes(plan):
        if node["Node Type"].endswith("Scan"):
            backward = " Backward" if node.get("Scan Direction") == "Backward" else ""
            found.append((node["Node Type"] + backward, node.get("Index Name")))
    return found


def _buffers(plan: dict[str, Any]) -> int:
    """The pages the statement touched (found in shared buffers or read)."""
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def _generic_plans(conn: psycopg.Connection[Any]) -> bool:
    return int(conn.info.server_version) >= 160000  # EXPLAIN (GENERIC_PLAN)


def test_a_runs_events_are_read_by_primary_key_in_pages_bounded_by_its_events(seeded):
    conn = seeded
    run = run_id(RUNS // 2)
    prefix = run.encode() + b"\x00"
    events = SQL["events"]
    # The run's events (`RunStore.events`, a worker's replay): one range scan of the key.
    plan = _plan(conn, events["range"], (prefix, prefix_end(prefix)))
    assert _scans(plan) == [("Index Scan", "pyrula_events_pkey")]
    assert plan["Actual Rows"] == EVENTS_PER_RUN
    # Its 10 events lie on 10 heap pages; the index adds its height: ~10 of 7,000+ pages.
    assert _buffers(plan) <= EVENTS_PER_RUN + 6
    # Past a known event (`events(after=)`) the scan starts at its key.
    plan = _plan(conn, events["range"], (event_key(run, 8), prefix_end(prefix)))
    assert plan["Actual Rows"] == 3 and _buffers(plan) <= 3 + 6
    # The run's last event (`next_seq`: the sequence number the next fact takes).
    plan = _plan(conn, events["last_below"], (prefix, prefix_end(prefix)))
    assert _scans(plan) == [("Index Scan Backward", "pyrula_events_pkey")]
    assert plan["Actual Rows"] == 1 and _buffers(plan) <= 1 + 6
    # A run with no events yet (a fresh submission's first read): nothing but the index.
    empty = run_id(RUNS + 1).encode() + b"\x00"
    plan = _plan(conn, events["range"], (empty, prefix_end(empty)))
    assert plan["Actual Rows"] == 0 and _buffers(plan) <= 6
    # A purge deletes the keys its batch read, in one statement, each found by the primary key.
    conn.execute("BEGIN")
    try:
        keys = [event_key(run, seq) for seq in range(1, EVENTS_PER_RUN + 1)]
        plan = _plan(conn, events["delete_many"], (keys,))
        assert _scans(plan) == [("Index Scan", "pyrula_events_pkey")]
        assert _buffers(plan) <= 6 * EVENTS_PER_RUN  # a descent of the index and a heap page each
    finally:
        conn.execute("ROLLBACK")
    if _generic_plans(conn):  # a prepared statement's generic plan is the same scan
        assert _scans(_generic(conn, events["range"])) == [("Index Scan", "pyrula_events_pkey")]
        assert _scans(_generic(conn, events["last_below"])) == [
            ("Index Scan Backward", "pyrula_events_pkey")
        ]


def test_a_claims_reads_and_writes_use_primary_keys_and_touch_only_their_rows(seeded):
    conn = seeded
    # The queue read (`RunLeases.claim_many`): one page of keys from a random place in it,
    # read from the index alone and bounded by the page, not by the queue, runs or events.
    middle = run_id(QUEUED * 25).encode()
    plan = _plan(conn, SQL["queue"]["keys"], (middle, CLAIM_PAGE))
    assert _scans(plan) in (
        [("Index Only Scan", "pyrula_queue_pkey")],
        [("Index Scan", "pyrula_queue_pkey")],
    )
    assert plan["Actual Rows"] == CLAIM_PAGE
    assert _buffers(plan) <= 6  # a descent of the index and a page or two of its leaves
    # 64 queued runs' records at once (`get_many`), then the candidates' records and queue
    # rows again inside the claim's write (`get_many`, `get` for one).
    keys = [run_id(n).encode() for n in range(50, 50 * 65, 50)]
    plan = _plan(conn, SQL["runs"]["get_many"], (keys,))
    assert _scans(plan) == [("Index Scan", "pyrula_runs_pkey")]
    assert plan["Actual Rows"] == 64 and _buffers(plan) <= 5 * 64  # a descent of the index each
    for name in ("runs", "queue"):
        plan = _plan(conn, SQL[name]["get"], (keys[0],))
        assert _scans(plan) == [("Index Scan", f"pyrula_{name}_pkey")]
        assert plan["Actual Rows"] == 1 and _buffers(plan) <= 6
    # The claim's writes, an upsert of the run's record and of its lease (rolled back here),
    # find their row by the primary key too.
    conn.execute("BEGIN")
    try:
        for name, key, value in (
            ("runs", keys[0], b"{}"),
            ("flags", lease_key(run_id(50)), lease_value("w", 2)),
        ):
            plan = _plan(conn, SQL[name]["put"], (key, value))
            assert plan["Node Type"] == "ModifyTable"
            assert plan["Conflict Arbiter Indexes"] == [f"pyrula_{name}_pkey"]
            assert _buffers(plan) <= 12
        # A step's fact: the fenced insert of a group commit, its `after` event and its lease
        # looked up by key.
        run = run_id(50)
        statement = fenced_sql("events", "flags", ())
        columns = [
            [event_key(run, EVENTS_PER_RUN + 1)],
            [b"{}"],
            [event_key(run, EVENTS_PER_RUN)],
            [lease_key(run)],
            [lease_value("w", 2)],  # the lease the claim just wrote
        ]
        plan = _plan(conn, statement, tuple(columns))
        scans = _scans(plan)
        assert plan["Actual Rows"] == 1  # the fact was added
        assert ("Index Only Scan", "pyrula_events_pkey") in scans  # its previous event
        assert ("Index Scan", "pyrula_flags_pkey") in scans  # its lease
        assert all(kind != "Seq Scan" for kind, _ in scans)
        assert _buffers(plan) <= 30
    finally:
        conn.execute("ROLLBACK")
    if _generic_plans(conn):
        for name in ("runs", "queue"):
            assert _scans(_generic(conn, SQL[name]["get"])) == [
                ("Index Scan", f"pyrula_{name}_pkey")
            ]
        assert _scans(_generic(conn, SQL["runs"]["get_many"])) == [
            ("Index Scan", "pyrula_runs_pkey")
        ]
