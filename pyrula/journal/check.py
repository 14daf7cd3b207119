"""Walking a store to find what is damaged, without stopping at the first damaged record.

`check(store)` reads every exchange (its header, its request document, every frame page, each
checked against its checksum or digest) and every request part in `blobs` (each against the
digest that is its key), and lists what did not read. `readable(exchanges, prefix)` is the same
walk over headers only, for a command that goes on with the records that still read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyrula.errors import StoreCorrupt
from pyrula.journal.exchanges import ExchangeRecord, Exchanges, decode_header
from pyrula.journal.store import Store


@dataclass(frozen=True, slots=True)
class Damage:
    """One thing that did not read: where (`exchange` key or `blob` digest) and why."""

    where: str
    key: bytes
    reason: str
    record_id: str | None = None


@dataclass(slots=True)
class Report:
    """What a walk of a store found."""

    exchanges: int = 0
    blobs: int = 0
    damage: list[Damage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damage


def readable(
    exchanges: Exchanges, prefix: bytes = b""
) -> Iterator[tuple[bytes, ExchangeRecord | Damage]]:
    """Every key under `prefix` with its record header, or the `Damage` that stops it reading."""
    for key, value in exchanges.store.iter_prefix(exchanges.store.exchanges_db, prefix):
        try:
            yield key, decode_header(value, key)
        except StoreCorrupt as exc:
            yield key, Damage("exchange", key, str(exc))


def check(store: Store) -> Report:
    """Read everything in `store` and list what is damaged (an LMDB-level failure that stops
    the walk itself is raised as `StoreCorrupt`)."""
    report = Report()
    exchanges = Exchanges(store)
    for key, found in readable(exchanges):
        report.exchanges += 1
        if isinstance(found, Damage):
            report.damage.append(found)
            continue
        try:
            exchanges.request(found)
            got = exchanges.get(key)
            if got is not None:
                for _frame in exchanges.frames(*got):
                    pass
        except StoreCorrupt as exc:
            report.damage.append(Damage("exchange", key, str(exc), found.id))
    if store.blobs_db is not None:
        with store.read() as txn:
            for digest, value in txn.scan(store.blobs_db):
                report.blobs += 1
                if hashlib.sha256(value).digest() != bytes(digest):
                    report.damage.append(Damage("blob", bytes(digest), "does not match its digest"))
    return report
