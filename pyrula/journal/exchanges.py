"""Recorded exchanges: what was asked (scrubbed, canonical) and every frame of what came back.

Under its key in the `exchanges` database, one exchange is one value: its record header and the
reply's page 0 (`records.py`: the layout of each record format; format 3, a binary header, is
written now). A page is a run of frames, each `u32 length | bytes`, packed up to `PAGE_BYTES`.
Page 0 sits in the exchange's own value, so a small reply replays from a single read. Pages 1..
live in the `frames` database under `record id | u32 page`, each as `u32 CRC-32 | page`, and a
replay reads them one at a time: memory stays bounded by a page, not by the reply.

The checksums make damage a typed error (`StoreCorrupt` naming the record) instead of wrong
bytes served as a reply. Records of format 1 (no marker byte, no checksums) and 2 (a JSON
header) still read.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrula.errors import RestoreRefused, StoreCorrupt
from pyrula.fingerprints.bounded import BoundedCache
from pyrula.journal import blobs, pending, sent_index
from pyrula.journal.async_store import on_store_thread
from pyrula.journal.prepared import PreparedExchange
from pyrula.journal.records import (
    RECORD_FORMAT,
    ExchangeRecord,
    encode,
    encode_newest,
    verified,
)
from pyrula.journal.records import decode as _decode
from pyrula.journal.store import Store, Txn

PAGE_BYTES = 64 * 1024
_U32 = struct.Struct(">I")
# `extra` of a forked run's copy of an exchange: the key (hex) the exchange was recorded under.
COPIED_FROM = "copied_from"


# Not frozen: one is made per recording, and a frozen dataclass sets each field through
# `object.__setattr__` (about 4x the cost of building it).
@dataclass(slots=True)
class Exchange:
    """One live exchange to write, already scrubbed: `Exchanges.put` makes its record."""

    # The scrubbed canonical request, kept once in `blobs`: a document, or one already encoded
    # (`blobs.encode_request`, as the recorder hands it over).
    request_doc: dict[str, Any] | blobs.EncodedRequest
    surface: str
    fingerprint: str
    method: str
    url: str
    status: int
    headers: list[tuple[str, str]]
    frames: list[bytes]
    streamed: bool
    elapsed_ms: float
    namespace: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoredExchange:
    """An exchange as a store holds it (one line of an export): its key, its record header,
    its request document and its frames."""

    key: bytes
    record: ExchangeRecord
    request: dict[str, Any]
    frames: list[bytes]


def _pack(frames: Iterable[bytes]) -> list[bytes]:
    pages: list[bytes] = []
    current = bytearray()
    for frame in frames:
        if current and len(current) + len(frame) + 4 > PAGE_BYTES:
            pages.append(bytes(current))
            current = bytearray()
        current += _U32.pack(len(frame))
        current += frame
    pages.append(bytes(current))
    return pages


def _unpack(page: bytes) -> list[bytes]:
    """The frames of one page (bounded by `PAGE_BYTES`, or by one frame bigger than that)."""
    frames = []
    offset = 0
    end = len(page)
    while offset < end:
        if offset + 4 > end:
            raise StoreCorrupt("a recorded frame page is truncated")
        (length,) = _U32.unpack_from(page, offset)
        offset += 4
        if offset + length > end:
            raise StoreCorrupt("a recorded frame runs past the end of its page")
        frames.append(page[offset : offset + length])
        offset += length
    return frames


# Recently read records, keyed by their stored bytes (header, checksum and first page): reading
# the same recording again (a test suite replaying a cassette repeatedly, the proxy answering
# many clients) skips checking and decoding it. Exact: a hit compares every byte, so a record
# changed in any way is decoded afresh. Bounded: values up to _DECODED_VALUE_BYTES, at most
# 8 MiB in all, oldest dropped first (`BoundedCache`). The cached record is shared: nothing
# may change its `headers` or `extra` (nothing does).
_DECODED_VALUE_BYTES = 16 * 1024
_decoded: BoundedCache[bytes, tuple[ExchangeRecord, bytes]] = BoundedCache(8 * 1024 * 1024, len)


def _decoded_record(value: bytes, key: bytes) -> tuple[ExchangeRecord, bytes]:
    """A stored record and its first page, through the cache of recently read ones."""
    if len(value) > _DECODED_VALUE_BYTES:
        return _decode(value, key)
    found: tuple[ExchangeRecord, bytes] | None = _decoded.get(value)
    if found is None:
        found = _decode(value, key)
        _decoded.put(value, found)
    return found


def _page_key(record_id: str, page: int) -> bytes:
    return bytes.fromhex(record_id) + _U32.pack(page)


def _later_pages(record: ExchangeRecord, pages: list[bytes]) -> list[tuple[bytes, bytes]]:
    """Pages 1.. of `record` as stored: (page key, page), checksummed from format 2 on."""
    return [
        (_page_key(record.id, number), _U32.pack(zlib.crc32(page)) + page)
        if record.format >= 2
        else (_page_key(record.id, number), page)
        for number, page in enumerate(pages[1:], start=1)
    ]


class Exchanges:
    """Read and write recorded exchanges in a store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._db = store.exchanges_db
        self._frames = store.frames_db
        self._blobs = store.blobs_db
        # Where a read is a local lookup (LMDB), a replay may find a request by its sent digest
        # (`sent_index.py`); on a server the extra round trip costs more than it saves.
        self._sent_table = store.db(sent_index.TABLE)  # written on every backend
        self._sent = None if store.remote else self._sent_table
        pending.recover(self)  # what a stopped process left pending (`pending.py`)

    def get(self, key: bytes) -> tuple[ExchangeRecord, bytes] | None:
        """The record under `key` and its first page, from one read."""
        value = self.store.get(self._db, key)
        if value is None:
            return None
        return _decoded_record(value, key)

    def finds_sent(self) -> bool:
        """Whether `find_sent` may answer here: an LMDB store whose sent index holds an entry
        (one cursor read; a text cassette's cache rebuilt from its file holds none)."""
        if self._sent is None:
            return False
        return next(self.store.iter_prefix(self._sent, b""), None) is not None

    def find_sent(
        self, sent: bytes, key_for: Callable[[bytes], bytes]
    ) -> tuple[bytes, ExchangeRecord, bytes] | None:
        """The record of a request by its sent digest, in one read transaction: the fingerprint
        the sent index holds for `sent`, then the record under `key_for(fingerprint)` (32 raw
        bytes), if it carries that fingerprint. None when either is missing (`key_for` may
        have been called)."""
        if self._sent is None:
            return None
        found = self.store.get_then(self._sent, sent, key_for, self._db)
        if found is None:
            return None
        fingerprint, key, value = found
        if value is None:
            return None
        record, first_page = _decoded_record(value, key)
        if record.fingerprint != fingerprint.hex():
            return None
        return key, record, first_page

    def frames(self, record: ExchangeRecord, first_page: bytes) -> Iterator[bytes]:
        """The reply's frames in order, one page in memory at a time (page 0's split at once).
        Asked on a store thread for an event loop (`async_store.acall`: a replay planned off
        the loop), the further pages are read there and then (a record is capped, 1 MB by
        default), rather than by the reader later, on the loop."""
        frames = iter(_unpack(first_page))
        if record.pages <= 1:
            return frames
        paged = self._paged(record, frames)
        return iter(list(paged)) if on_store_thread() else paged

    def _paged(self, record: ExchangeRecord, first: Iterator[bytes]) -> Iterator[bytes]:
        yield from first
        for page in range(1, record.pages):
            with self.store.read() as txn:
                data = txn.get(_page_key(record.id, page), db=self._frames)
                if data is None:
                    raise StoreCorrupt(f"record {record.id} is missing frame page {page}")
                data = bytes(data)
            if record.format >= 2:
                data = verified(data, f"record {record.id} frame page {page}")
            yield from _unpack(data)

    def body(self, record: ExchangeRecord, first_page: bytes) -> bytes:
        return b"".join(self.frames(record, first_page))

    def put(
        self,
        key: bytes,
        exchange: Exchange,
        *,
        also: Callable[[Txn, ExchangeRecord], None] | None = None,
        sent: tuple[bytes, bytes] | None = None,
    ) -> ExchangeRecord:
        """Write one exchange in one committed transaction (replacing any record under `key`),
        with `sent`, its sent-index entry, if given (`sent_index.entry`).

        `also` runs inside the same transaction, after the record is written, so the facts it
        adds (a run's fence check, its metering event) commit with the exchange or not at all.
        """
        prepared = self.prepare(key, exchange, sent=sent)

        def write(txn: Txn) -> ExchangeRecord:
            self.apply(txn, prepared)
            if also is not None:
                also(txn, prepared.record)
            return prepared.record

        return self.store.write(write)

    def prepare(
        self, key: bytes, exchange: Exchange, *, sent: tuple[bytes, bytes] | None = None
    ) -> PreparedExchange:
        """Everything a write of `exchange` under `key` puts, encoded once (`apply` writes it):
        the record, its pages, its request's blobs and `sent`, its sent-index entry."""
        frames = exchange.frames
        size = sum(map(len, frames))
        request = exchange.request_doc
        if not isinstance(request, blobs.EncodedRequest):
            request = blobs.encode_request(request)
        self.store.check_size(size + request.size, "recorded exchange")
        pages = _pack(frames)
        record = ExchangeRecord(
            id=os.urandom(16).hex(),
            surface=exchange.surface,
            fingerprint=exchange.fingerprint,
            request=request.ref,
            method=exchange.method,
            url=exchange.url,
            status=exchange.status,
            headers=exchange.headers,
            frames=len(frames),
            size=size,
            pages=len(pages),
            streamed=exchange.streamed,
            recorded_at=time.time(),
            elapsed_ms=round(float(exchange.elapsed_ms), 3),
            namespace=exchange.namespace,
            extra=exchange.extra,
        )
        record, value = encode_newest(record, pages[0])
        later = _later_pages(record, pages) if len(pages) > 1 else []
        return PreparedExchange(key, record, value, later, request.blobs, sent)

    def apply(self, txn: Txn, prepared: PreparedExchange) -> None:
        """Put a prepared exchange in `txn`, dropping the pages of the record it replaces."""
        self._put(txn, prepared.key, prepared.value, prepared.pages)
        for digest, data in prepared.blobs:
            txn.put(digest, data, db=self._blobs, overwrite=False)
        if prepared.sent is not None and self._sent_table is not None:
            # The same value whenever the key is written again.
            txn.put(prepared.sent[0], prepared.sent[1], db=self._sent_table)

    def restore(self, exchanges: Sequence[StoredExchange]) -> int:
        """Write exchanges exactly as they were stored (their keys, ids, timestamps and elapsed
        times), all in one transaction; return how many replaced a record under the same key.

        Nothing is written when one cannot be: its record id belongs to another key here, or
        its request document is not the one its record refers to (`RestoreRefused`, whose
        `index` says which).
        """
        packed = [_pack(item.frames) for item in exchanges]
        sent_db = self.store.db(sent_index.TABLE)

        def commit(txn: Txn) -> int:
            # Frame pages are keyed by record id: an id may belong to one key only.
            owners = {}
            for k, v in txn.scan(self._db):
                found = _readable(v)
                if found is not None:
                    owners[found.id] = k
            replaced = 0
            for index, (item, pages) in enumerate(zip(exchanges, packed, strict=True)):
                owner = owners.get(item.record.id)
                if owner is not None and owner != item.key:
                    raise RestoreRefused(
                        f"record id {item.record.id} already belongs to another exchange in "
                        "this store; import into a store without it",
                        index=index,
                    )
                ref = blobs.put_request(txn, self._blobs, item.request)
                if ref != item.record.request:
                    raise RestoreRefused(
                        "the request document does not match the record's reference (was the "
                        "file edited?); export it again",
                        index=index,
                    )
                record = item.record._replace(pages=len(pages))
                replaced += txn.get(item.key, db=self._db) is not None
                try:
                    self._write_record(txn, item.key, record, pages)
                except ValueError as exc:  # a field its record format cannot hold exactly
                    raise RestoreRefused(
                        f"record {item.record.id} cannot be stored as it was exported ({exc}); "
                        "export it again",
                        index=index,
                    ) from exc
                sent_index.restore_entry(txn, sent_db, record)
            return replaced

        return self.store.write(commit)

    def copy(self, key: bytes, to: bytes) -> bool:
        """Make the record under `key` answer under `to` as well (a forked run's calls); return
        whether there was one. Both keys share the record's id and its frame pages; the one
        under `to` says so (`copied_from`: the key the exchange was recorded under), so a
        listing shows the exchange once and deleting the copy leaves the pages to the record."""

        def write(txn: Txn) -> bool:
            value = txn.get(key, db=self._db)
            if value is None:
                return False
            record, first_page = _decode(value, key)
            origin = copied_from(record) or key
            marked = record._replace(extra={**record.extra, COPIED_FROM: origin.hex()})
            txn.put(to, encode(marked, first_page), db=self._db)
            return True

        return self.store.write(write)

    def _write_record(
        self, txn: Txn, key: bytes, record: ExchangeRecord, pages: list[bytes]
    ) -> None:
        """Put `record` and its pages under `key` in the record's own format (a restore)."""
        self._put(txn, key, encode(record, pages[0]), _later_pages(record, pages))

    def _put(self, txn: Txn, key: bytes, value: bytes, later: list[tuple[bytes, bytes]]) -> None:
        """Put a record's stored value and its further pages under `key`, dropping the pages of
        the record it replaces."""
        old = txn.get(key, db=self._db)
        if old is not None:
            self._delete_pages(txn, _readable(old))
        txn.put(key, value, db=self._db)
        for page_key, page in later:
            txn.put(page_key, page, db=self._frames)

    def _delete_pages(self, txn: Txn, record: ExchangeRecord | None) -> None:
        """Delete a record's frame pages (none known when the record is damaged; none for a
        copy, whose pages are its original's)."""
        for key in _page_keys(record):
            txn.delete(key, db=self._frames)

    def delete(self, keys: Iterable[bytes]) -> int:
        """Remove records (their frames too); return how many existed."""
        keys = list(keys)

        def write(txn: Txn) -> int:
            removed = 0
            for key in keys:
                old = txn.get(key, db=self._db)
                if old is None:
                    continue
                self._delete_pages(txn, _readable(old))
                txn.delete(key, db=self._db)
                removed += 1
            return removed

        return self.store.write(write)

    def delete_scanned(self, txn: Txn, rows: Sequence[tuple[bytes, bytes]]) -> None:
        """Remove the records `rows` (keys and stored values, as `txn.scan` gives them) and
        their frame pages inside `txn`: one statement per table on PostgreSQL (a purge's)."""
        pages = [key for _, value in rows for key in _page_keys(_readable(value))]
        txn.delete_many(pages, db=self._frames)
        txn.delete_many([key for key, _ in rows], db=self._db)

    def scan(
        self, prefix: bytes = b"", *, after: bytes | None = None
    ) -> Iterator[tuple[bytes, ExchangeRecord]]:
        """The records whose key starts with `prefix`, in key order (past `after` if given)."""
        for key, value in self.store.iter_prefix(self._db, prefix, after=after):
            yield key, _decode(value, key)[0]

    def request(self, record: ExchangeRecord) -> dict[str, Any]:
        """The record's request document; `StoreCorrupt` naming the record when it is damaged."""
        with self.store.read() as txn:
            try:
                return blobs.get_request(txn, self._blobs, record.request)
            except StoreCorrupt as exc:
                raise StoreCorrupt(f"record {record.id}: its request document is {exc}") from exc

    def collect_garbage(self) -> int:
        """Delete blobs no record reaches any more, and the sent index's entries whose
        fingerprint no record carries; return how many blobs went.

        One write transaction for the whole sweep: a writer that shares an existing blob while
        we sweep would otherwise lose it.
        """
        index = self.store.db(sent_index.TABLE)

        def sweep(txn: Txn) -> int:
            live: set[bytes] = set()
            fingerprints: set[str] = set()
            for _key, value in txn.scan(self._db):
                record = _decode(value)[0]
                live |= blobs.blob_refs(txn, self._blobs, record.request)
                fingerprints.add(record.fingerprint)
            if index is not None:
                stale = [k for k, v in txn.scan(index) if bytes(v).hex() not in fingerprints]
                for key in stale:
                    txn.delete(key, db=index)
            dead = [k for k, _ in txn.scan(self._blobs) if k not in live]
            return sum(1 for k in dead if txn.delete(k, db=self._blobs))

        return self.store.write(sweep)


def copied_from(record: ExchangeRecord) -> bytes | None:
    """The key of the exchange `record` is a copy of (`Exchanges.copy`), or None: recorded
    under its own key."""
    origin = record.extra.get(COPIED_FROM)
    if not isinstance(origin, str):
        return None
    try:
        return bytes.fromhex(origin)
    except ValueError:
        return None


def _page_keys(record: ExchangeRecord | None) -> list[bytes]:
    """The keys of a record's frame pages past the first (none known when the record is
    damaged; none for a copy, whose pages are its original's)."""
    if record is None or copied_from(record) is not None:
        return []
    return [_page_key(record.id, page) for page in range(1, record.pages)]


def decode_header(value: bytes | memoryview, key: bytes) -> ExchangeRecord:
    """The record header stored under `key`; `StoreCorrupt` naming the key when it is damaged."""
    return _decode(value, key)[0]


def _readable(value: bytes | memoryview) -> ExchangeRecord | None:
    """The record in `value`, or None when it is damaged (to replace or delete it anyway)."""
    try:
        return _decode(value)[0]
    except StoreCorrupt:
        return None


__all__ = [
    "COPIED_FROM",
    "PAGE_BYTES",
    "RECORD_FORMAT",
    "Exchange",
    "ExchangeRecord",
    "Exchanges",
    "PreparedExchange",
    "StoredExchange",
    "copied_from",
    "decode_header",
]
