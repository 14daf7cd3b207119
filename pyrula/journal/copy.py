"""Moving a store between backends: every table, key for key and byte for byte."""

from __future__ import annotations

from collections.abc import Callable

from pyrula.errors import StoreError
from pyrula.journal.store import DATABASES, Store, Txn

# The tables a copy carries: everything but the store's own marker (each backend writes its own).
COPIED = tuple(name for name in DATABASES if name != "meta")
_BATCH = 500


def copy_store(
    source: Store, target: Store, *, progress: Callable[[str, int], None] | None = None
) -> dict[str, int]:
    """Copy every entry of `source` into `target`, which must hold none yet; return the count
    per table. Entries go in batches of one transaction each, in key order."""
    counts: dict[str, int] = {}
    with target.read() as txn:
        for name in COPIED:
            if next(iter(txn.scan(target.db(name))), None) is not None:
                raise StoreError(
                    f"{target.location} already holds {name}; copy into an empty store"
                )
    for name in COPIED:
        db_from, db_to = source.db(name), target.db(name)
        counts[name] = 0
        if db_from is None:
            continue
        batch: list[tuple[bytes, bytes]] = []
        for key, value in source.iter_prefix(db_from, b""):
            batch.append((key, value))
            if len(batch) >= _BATCH:
                counts[name] += _write(target, db_to, batch)
                batch = []
                if progress is not None:
                    progress(name, counts[name])
        counts[name] += _write(target, db_to, batch)
    return counts


def _write(target: Store, db: object, batch: list[tuple[bytes, bytes]]) -> int:
    if not batch:
        return 0

    def write(txn: Txn) -> int:
        for key, value in batch:
            txn.put(key, value, db=db)
        return len(batch)

    return target.write(write)
