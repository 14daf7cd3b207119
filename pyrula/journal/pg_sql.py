"""The statements a PostgreSQL store runs on its tables (`pg_schema`), formatted once.

Only the fixed table names are ever formatted into SQL; every key and value is a parameter.
"""

from __future__ import annotations

import functools

from pyrula.journal.pg_schema import table
from pyrula.journal.store_base import DATABASES

SCAN_BATCH = 1000
# One lock for the whole store (its schema): writers serialise on it as on LMDB's write lock.
WRITE_LOCK = "pg_advisory_xact_lock(hashtext('pyrula:' || current_schema()))"
SHARED_LOCK = "pg_advisory_xact_lock_shared(hashtext('pyrula:' || current_schema()))"
# The lock of one name (a run, an idempotency token) in a scoped write (`begin_write`).
NAME_LOCK = "hashtextextended('pyrula:' || current_schema() || ':' || {}, 0)"
# `Txn.try_lock`: the names of an array locked without waiting, in the array's order.
TRY_LOCK = (
    "SELECT n FROM unnest(%s::text[]) WITH ORDINALITY AS t(n, i) "
    f"WHERE pg_try_advisory_xact_lock({NAME_LOCK.format('n')}) ORDER BY i"
)


def statements(name: str) -> dict[str, str]:
    """The statements of the `Txn` interface on table `name`."""
    t = table(name)
    return {
        "get": f"SELECT v FROM {t} WHERE k = %b",
        "get_many": f"SELECT k, v FROM {t} WHERE k = ANY(%b)",
        "put": f"INSERT INTO {t} (k, v) VALUES (%b, %b) "
        "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
        "add": f"INSERT INTO {t} (k, v) VALUES (%b, %b) ON CONFLICT (k) DO NOTHING",
        "delete": f"DELETE FROM {t} WHERE k = %b",
        "delete_many": f"DELETE FROM {t} WHERE k = ANY(%b)",
        "range": f"SELECT k, v FROM {t} WHERE k >= %b AND k < %b ORDER BY k LIMIT {SCAN_BATCH}",
        "from": f"SELECT k, v FROM {t} WHERE k >= %b ORDER BY k LIMIT {SCAN_BATCH}",
        "keys": f"SELECT k FROM {t} WHERE k >= %b ORDER BY k LIMIT %s",
        "last_below": f"SELECT k, v FROM {t} WHERE k >= %b AND k < %b ORDER BY k DESC LIMIT 1",
        "last": f"SELECT k, v FROM {t} WHERE k >= %b ORDER BY k DESC LIMIT 1",
    }


SQL = {name: statements(name) for name in DATABASES}


@functools.lru_cache(maxsize=64)
def fenced_sql(db: str, fence_db: str | None, also: tuple[str, ...]) -> str:
    """The statement of `PgTxn.flush` (`postgres.py`) for fenced puts into `db`: one row per put
    (arrays of keys, values, `after` keys, fence keys and values, `also` keys and values); each
    key added if it is new, its `after` key exists (or is NULL) and its fence row holds its
    value; each `also` row put only if its key was added; the keys added returned."""
    columns = ["k", "val", "after"]
    tests = [f"(v.after IS NULL OR EXISTS (SELECT 1 FROM {table(db)} e WHERE e.k = v.after))"]
    if fence_db is not None:
        columns += ["fk", "fv"]
        tests.append(f"EXISTS (SELECT 1 FROM {table(fence_db)} f WHERE f.k = v.fk AND f.v = v.fv)")
    for n in range(len(also)):
        columns += [f"a{n}k", f"a{n}v"]
    arrays = ", ".join("%b::bytea[]" for _ in columns)
    parts = [
        f"v AS (SELECT * FROM unnest({arrays}) AS v({', '.join(columns)}))",
        f"added AS (INSERT INTO {table(db)} (k, v) SELECT v.k, v.val FROM v "
        f"WHERE {' AND '.join(tests)} ON CONFLICT (k) DO NOTHING RETURNING k)",
    ]
    for n, name in enumerate(also):
        parts.append(
            f"also{n} AS (INSERT INTO {table(name)} (k, v) SELECT v.a{n}k, v.a{n}v "
            "FROM v JOIN added ON added.k = v.k ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v)"
        )
    return f"WITH {', '.join(parts)} SELECT k FROM added"


def begin_write(scope: list[str] | None, *, token: bool = True) -> str:
    """The first statement of a write: its commit token (unless `token` is False: a fenced-only
    write is settled by its rows instead), then its locks, in one round trip.

    Unscoped: the store's lock, exclusive. Scoped: that lock shared, then one exclusive lock
    per name, in sorted order (so two writers never wait on each other in a cycle); with no
    names, the shared lock only (its names then taken with `Txn.try_lock`, which never waits)."""
    first = "WITH token AS (INSERT INTO pyrula_commits (token) VALUES (%b)) " if token else ""
    if scope is None:
        return f"{first}SELECT {WRITE_LOCK}"
    each = f"pg_advisory_xact_lock({NAME_LOCK.format('%s')})"
    return f"{first}SELECT " + ", ".join([SHARED_LOCK, *(each for _ in scope)])
