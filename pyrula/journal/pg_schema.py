"""The PostgreSQL store's schema, versioned with forward-only migrations.

Each named table of the store (`store.DATABASES`) is a table `pyrula_<name>` of `(k bytea
primary key, v bytea)`: bytea compares byte by byte, so key order and prefix scans are LMDB's.
`pyrula_meta` holds the store's marker and format (as on LMDB) and `schema`, the number of the
last migration applied. A migration is a list of statements; one never changes once released,
a change is a new one appended to `MIGRATIONS`.
"""

from __future__ import annotations

from pyrula.journal.store_base import DATABASES

MAGIC = b"pyrula-store"


def table(name: str) -> str:
    """The SQL name of a store table (only the fixed names are ever formatted into SQL)."""
    if name not in DATABASES:
        raise KeyError(f"no store table {name!r}")
    return f"pyrula_{name}"


MIGRATIONS: list[list[str]] = [
    # 1: the named tables, and the commit tokens that make a retried commit exactly-once.
    [
        *(
            f"CREATE TABLE IF NOT EXISTS {table(name)} (k bytea PRIMARY KEY, v bytea NOT NULL)"
            for name in DATABASES
        ),
        "CREATE TABLE IF NOT EXISTS pyrula_commits "
        "(token bytea PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())",
    ],
    # 2: the sent index (`journal/sent_index.py`), derived data a replay may skip.
    [f"CREATE TABLE IF NOT EXISTS {table('sent_index')} (k bytea PRIMARY KEY, v bytea NOT NULL)"],
]

SCHEMA_VERSION = len(MIGRATIONS)
