"""Finding recorded exchanges: open the store, select by filter, resolve an id, load one."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import lmdb

from pyrula.errors import AmbiguousRecord, StoreCorrupt, UnknownRecord
from pyrula.journal.check import Damage, readable
from pyrula.journal.exchanges import ExchangeRecord, Exchanges, copied_from
from pyrula.journal.keys import CASSETTE_PREFIX, run_prefix, split_key
from pyrula.journal.store import Store

_DAY = 86400.0


@contextmanager
def opened(path: str | os.PathLike[str] | None, *, create: bool = False) -> Iterator[Store]:
    """The store at `path` (default: PYRULA_STORE or ./.pyrula), closed again afterwards.

    Without `create` a missing or foreign folder is a typed error and nothing is created.
    """
    store = Store(path, create=create)
    try:
        yield store
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded exchange as a command sees it: its key and its record header."""

    key: bytes
    record: ExchangeRecord

    @property
    def namespace(self) -> str:
        return self.record.namespace

    @property
    def occurrence(self) -> int | None:
        """Which repeat of an identical request this is (cassette keys only)."""
        if not self.key.startswith(CASSETTE_PREFIX):
            return None
        try:
            return split_key(self.key)[2]
        except (ValueError, UnicodeDecodeError):
            return None


@dataclass(frozen=True, slots=True)
class Selection:
    """Which exchanges a command acts on; every filter is optional."""

    prefix: str | None = None  # cassette names starting with this
    surface: str | None = None
    older_than_days: float | None = None
    run: str | None = None  # the model calls journaled by this run
    # A forked run's copies of the exchanges it replays (`Exchanges.copy`) are the same
    # exchanges again: listed only for that run (`run`), or when acting on every key.
    copies: bool = False

    def key_prefix(self) -> bytes:
        if self.run is not None:
            return run_prefix(self.run)
        return CASSETTE_PREFIX + self.prefix.encode() if self.prefix else b""

    def matches(self, record: ExchangeRecord, now: float) -> bool:
        if not (self.copies or self.run is not None) and copied_from(record) is not None:
            return False
        if self.surface is not None and record.surface != self.surface:
            return False
        if self.older_than_days is not None:
            return record.recorded_at < now - self.older_than_days * _DAY
        return True


def select(exchanges: Exchanges, selection: Selection = Selection()) -> list[Entry]:
    """The matching exchanges, in key order (cassette by cassette), each once."""
    now = time.time()
    with _damage_reported():
        return [
            Entry(key, record)
            for key, record in exchanges.scan(selection.key_prefix())
            if selection.matches(record, now)
        ]


def select_readable(
    exchanges: Exchanges, selection: Selection, damaged: list[Damage]
) -> list[Entry]:
    """The matching exchanges whose headers read; the others are added to `damaged`."""
    now = time.time()
    entries = []
    with _damage_reported():
        for key, found in readable(exchanges, selection.key_prefix()):
            if isinstance(found, Damage):
                damaged.append(found)
            elif selection.matches(found, now):
                entries.append(Entry(key, found))
    return entries


def load_readable(
    exchanges: Exchanges, entries: list[Entry], damaged: list[Damage]
) -> Iterator[Loaded]:
    """Load each entry in turn, adding the ones that do not read to `damaged`."""
    for entry in entries:
        try:
            yield load(exchanges, entry)
        except StoreCorrupt as exc:
            damaged.append(Damage("exchange", entry.key, str(exc), entry.record.id))


def resolve(exchanges: Exchanges, id_prefix: str) -> Entry:
    """The one exchange whose record id starts with `id_prefix`, else the one whose request
    fingerprint does (a replay miss names the nearest recording by its fingerprint, as a text
    cassette's file holds it)."""
    wanted = id_prefix.strip().lower()
    if not wanted:
        raise UnknownRecord("give an exchange id (or its first characters); `pyrula journal ls`")
    entries = select(exchanges)
    found = [entry for entry in entries if entry.record.id.startswith(wanted)]
    if not found:
        found = [entry for entry in entries if entry.record.fingerprint.startswith(wanted)]
    if not found:
        raise UnknownRecord(
            f"no exchange has an id or a fingerprint starting with {id_prefix!r}; "
            "`pyrula journal ls` lists the ids in this store"
        )
    if len(found) > 1:
        raise AmbiguousRecord(id_prefix, sorted(e.record.id for e in found))
    return found[0]


@dataclass(frozen=True, slots=True)
class Loaded:
    """An exchange with everything behind its header: request document and reply frames."""

    key: bytes
    record: ExchangeRecord
    request: dict[str, Any]
    frames: list[bytes]

    @property
    def body(self) -> bytes:
        return b"".join(self.frames)


def load(exchanges: Exchanges, entry: Entry) -> Loaded:
    """Read the request document and every frame of one exchange."""
    record = entry.record
    with _damage_reported(record.id):
        found = exchanges.get(entry.key)
        if found is None:
            raise UnknownRecord(f"exchange {record.id[:12]} was deleted while reading it; retry")
        record, first_page = found
        request = exchanges.request(record)
        frames = list(exchanges.frames(record, first_page))
    return Loaded(entry.key, record, request, frames)


@contextmanager
def _damage_reported(record_id: str = "") -> Iterator[None]:
    """Turn a missing blob or an LMDB failure met while reading into a `StoreCorrupt`."""
    try:
        yield
    # blobs.get_request signals a missing blob with KeyError.
    except (KeyError, lmdb.Error) as exc:
        what = f"exchange {record_id[:12]}" if record_id else "the store"
        detail = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise StoreCorrupt(
            f"{what} could not be read ({detail}); the store is damaged: "
            "restore it from a copy or prune the exchange"
        ) from exc
