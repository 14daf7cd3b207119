"""The statements a PostgreSQL store runs on its tables (`pg_schema`), formatted once.

Only the fixed table names are ever formatted into SQL; every key and value is a parameter.
"""

from __future__ import annotations

import functools

from pyrula.journal.pg_schema import table
from pyrula.journal.store import DATABASES

SCAN_BATCH = 1000


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
        "range": f"SELECT k, v FROM {t} WHERE k >= %b AND k < %b ORDER BY k LIMIT {SCAN_BATCH}",
        "from": f"SELECT k, v FROM {t} WHERE k >= %b ORDER BY k LIMIT {SCAN_BATCH}",
        "last_below": f"SELECT k, v FROM {t} WHERE k >= %b AND k < %b ORDER BY k DESC LIMIT 1",
        "last": f"SELECT k, v FROM {t} WHERE k >= %b ORDER BY k DESC LIMIT 1",
    }


SQL = {name: statements(name) for name in DATABASES}


@functools.lru_cache(maxsize=64)
def fenced_sql(db: str, fence_db: str | None, after: bool, also: tuple[str, ...]) -> str:
    """The statement of `PgTxn.put_fenced` (`postgres.py`): the fence and `after` tested, the
    key added if new, each `also` row put only if it was, and 1 returned if it was (0 if not)."""
    tests = []
    if fence_db is not None:
        tests.append(f"EXISTS (SELECT 1 FROM {table(fence_db)} WHERE k = %b AND v = %b)")
    if after:
        tests.append(f"EXISTS (SELECT 1 FROM {table(db)} WHERE k = %b)")
    where = f" WHERE {' AND '.join(tests)}" if tests else ""
    parts = [
        f"added AS (INSERT INTO {table(db)} (k, v) SELECT %b, %b{where} "
        "ON CONFLICT (k) DO NOTHING RETURNING 1)"
    ]
    for n, name in enumerate(also):
        parts.append(
            f"also{n} AS (INSERT INTO {table(name)} (k, v) SELECT %b, %b FROM added "
            "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v)"
        )
    return f"WITH {', '.join(parts)} SELECT count(*) FROM added"
