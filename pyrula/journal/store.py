"""The store interface: named key-value tables written in serialised transactions.

A store is chosen by its location: a folder path is an LMDB store (`lmdb_store.py`, the
default), a `postgresql://` URL is a PostgreSQL store (`postgres.py`). `Store(location)` returns
the right one, so every layer above (exchanges, blobs, runs, events, the queue, leases, tokens,
flags) is written once against `Txn` and runs unchanged on both.

This module is the factory that picks the backend (`backend_for`, `open_store`) and the import
path of the interface; the interface itself (`Store`, `Txn` and what the backends share) lives
below the backends, in `store_base.py`, so no backend imports the module that imports it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pyrula.journal.lmdb_store import LmdbStore
from pyrula.journal.store_base import (
    DATABASES,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_PATH,
    Fence,
    Location,
    Store,
    Txn,
    chained_get,
    default_location,
    default_path,
    display,
    is_url,
    prefix_end,
    record_cap,
    shown,
)


def backend_for(where: str) -> type[Store]:
    """The backend class of a store location: PostgreSQL for a `postgresql://` URL (imported
    then, so psycopg is loaded only where a server store is opened), else LMDB."""
    if is_url(where):
        from pyrula.journal.postgres import PostgresStore  # one way: postgres needs store_base

        return PostgresStore
    return LmdbStore


Store.backend_for = backend_for

_open_stores: dict[str, Store] = {}
_open_lock = threading.Lock()


def open_store(location: Location | None = None, *, create: bool = True) -> Store:
    """The process-wide `Store` for a location, opened on first use and kept open.

    With `create=False` a missing store raises `StoreNotFound` instead of being made empty."""
    where = os.fspath(location) if location is not None else default_location()
    key = where if is_url(where) else str(Path(where).resolve())
    with _open_lock:
        store = _open_stores.get(key)
    if store is None or store.closed:
        store = Store(key, create=create)
        with _open_lock:
            _open_stores[key] = store
    return store


__all__ = [
    "DATABASES",
    "DEFAULT_MAX_RECORD_BYTES",
    "DEFAULT_PATH",
    "Fence",
    "Location",
    "Store",
    "Txn",
    "backend_for",
    "chained_get",
    "default_location",
    "default_path",
    "display",
    "is_url",
    "open_store",
    "prefix_end",
    "record_cap",
    "shown",
]
