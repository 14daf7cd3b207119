"""Exchanges newest first: the store's keys ordered by when each was recorded, kept in memory.

The store indexes exchanges by key (cassette by cassette, run by run), not by time. A `TimeOrder`
reads the key index once and keeps each key's recording time, sorted newest first. It is brought
up to date when the store has committed since it last looked (`Store.commit_count`; on every
look where the backend has no such count), in one pass over the key index that decodes only the
records that are new or were replaced (a checksum of each stored value tells them apart).

Each key is numbered as it is first seen (or seen replaced): its arrival. A live view notes the
arrival count when it shows a page and later asks what arrived after it (`arrived_after`), so a
record written between the page and the question is neither missed nor shown twice.
"""

from __future__ import annotations

import bisect
import secrets
import threading
import time
import zlib
from collections.abc import Iterator
from typing import NamedTuple

from pyrula.errors import StoreCorrupt
from pyrula.journal.exchanges import Exchanges, decode_header


class Cursor(NamedTuple):
    """A place in the newest-first order: a record's time and key (its page link's `after` or
    `before`)."""

    recorded_at: float
    key: bytes

    def text(self) -> str:
        return f"{self.recorded_at!r}:{self.key.hex()}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor | None:
        """The cursor `text()` wrote, or None for a missing or mangled one."""
        if not text:
            return None
        when, _, key = text.rpartition(":")
        try:
            return cls(float(when), bytes.fromhex(key))
        except ValueError:
            return None


Item = tuple[float, bytes]  # (-recorded_at, key): ascending is newest first


class _Known(NamedTuple):
    checksum: int
    recorded_at: float
    arrival: int


class TimeOrder:
    """Every exchange key of one store by recording time, newest first (thread-safe)."""

    def __init__(self, exchanges: Exchanges) -> None:
        self.exchanges = exchanges
        # Arrival numbers are this instance's: a number from another one (a restarted page)
        # names nothing here, so it carries this token beside it.
        self.token = secrets.token_hex(4)
        self._lock = threading.Lock()
        self._known: dict[bytes, _Known] = {}
        self._order: list[Item] = []  # (-recorded_at, key), ascending
        self._arrivals: list[tuple[int, bytes]] = []  # (arrival, key) as they came
        self._arrived = 0
        self._commits: int | None = None
        self._read = False
        self.cost = 0.0  # seconds the last pass over the key index took

    def refresh(self) -> int:
        """Catch up with the store; return the arrival count (the last key's number)."""
        with self._lock:
            store = self.exchanges.store
            commits = store.commit_count()
            if self._read and commits is not None and commits == self._commits:
                return self._arrived
            began = time.perf_counter()
            known = self._known
            fresh: list[tuple[bytes, _Known]] = []  # new or replaced, with what is known now
            seen: set[bytes] = set()
            added = 0
            for key, value in store.iter_prefix(store.exchanges_db, b""):
                seen.add(key)
                checksum = zlib.crc32(value)
                old = known.get(key)
                if old is not None and old.checksum == checksum:
                    continue
                added += old is None
                self._arrived += 1
                fresh.append((key, _Known(checksum, _recorded_at(value, key), self._arrived)))
            removed = len(known) + added > len(seen)
            gone = [key for key in known if key not in seen] if removed else []
            if fresh or gone:
                self._order = self._reordered(fresh, gone)
                for key in gone:
                    del known[key]
                for key, entry in fresh:
                    known[key] = entry
                    self._arrivals.append((entry.arrival, key))
            self._commits, self._read = commits, True
            self.cost = time.perf_counter() - began
            return self._arrived

    def _reordered(self, fresh: list[tuple[bytes, _Known]], gone: list[bytes]) -> list[Item]:
        """The order with `gone` and the old places of `fresh` taken out and `fresh` put in:
        a copy, so that a page reading the current one meanwhile is not disturbed."""
        known = self._known
        if len(fresh) + len(gone) > len(known) // 20:  # many changes: sort afresh
            kept = {k: e.recorded_at for k, e in known.items()}
            for key in gone:
                del kept[key]
            kept.update((key, entry.recorded_at) for key, entry in fresh)
            return sorted((-when, key) for key, when in kept.items())
        order = list(self._order)
        for key in [*gone, *(key for key, _ in fresh if key in known)]:
            item = (-known[key].recorded_at, key)
            del order[bisect.bisect_left(order, item)]
        for key, entry in fresh:
            bisect.insort(order, (-entry.recorded_at, key))
        return order

    def older(self, than: Cursor | None = None) -> Iterator[Cursor]:
        """The keys newest first, from just past `than` (from the newest without it)."""
        order = self._order
        start = 0 if than is None else bisect.bisect_right(order, (-than.recorded_at, than.key))
        for index in range(start, len(order)):
            negative, key = order[index]
            yield Cursor(-negative, key)

    def newer(self, than: Cursor) -> Iterator[Cursor]:
        """The keys recorded after `than`, oldest of them first (a previous page, read back)."""
        order = self._order
        end = bisect.bisect_left(order, (-than.recorded_at, than.key))
        for index in range(end - 1, -1, -1):
            negative, key = order[index]
            yield Cursor(-negative, key)

    def is_newest(self, cursor: Cursor) -> bool:
        """Whether nothing was recorded after `cursor` (a page starting there is the first)."""
        return bisect.bisect_left(self._order, (-cursor.recorded_at, cursor.key)) == 0

    def is_oldest(self, cursor: Cursor) -> bool:
        """Whether nothing was recorded before `cursor` (a page ending there is the last)."""
        order = self._order
        return bisect.bisect_right(order, (-cursor.recorded_at, cursor.key)) == len(order)

    def arrived_after(self, arrival: int) -> list[Cursor]:
        """The keys that arrived (new or replaced) after number `arrival`, in arrival order."""
        with self._lock:
            start = bisect.bisect_right(self._arrivals, arrival, key=lambda item: item[0])
            found = []
            for number, key in self._arrivals[start:]:
                entry = self._known.get(key)
                if entry is not None and entry.arrival == number:  # not replaced or deleted since
                    found.append(Cursor(entry.recorded_at, key))
            return found


def _recorded_at(value: bytes, key: bytes) -> float:
    """When the record in `value` was recorded; a damaged one sorts oldest (its page reports it)."""
    try:
        return decode_header(value, key).recorded_at
    except StoreCorrupt:
        return 0.0
