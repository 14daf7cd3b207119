"""Recordings made durable by one append to a log, and put in the store in batches.

An LMDB commit flushes the disk twice, and an exchange's commit dirties pages scattered over
several B-trees (the record, its request's blobs, the sent index): on most disks that costs more
than the live call it records. Inside a cassette block, a recording is instead appended to this
process's pending log (`<store>/pending/<pid>-<random>.log`, an `append_log.AppendLog`) and
flushed once. The recordings are then put in the store together, in one transaction, when the
block ends, or sooner: after `FOLD_EVERY` recordings or `FOLD_BYTES` bytes, or `FOLD_SECONDS`
after the first of them (a timer). So a recording is on disk when the call returns, exactly as
before; other processes see it when its batch is put in the store.

The log holds what the store would: scrubbed requests, replies as kept. An entry's payload is
`key | value | pages | blobs | sent` (`_encode`). A log whose process died is put in the store
by the next process that opens the store's exchanges (`recover`), then deleted.
"""

from __future__ import annotations

import atexit
import logging
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from pyrula.errors import StoreError
from pyrula.journal import file_ahead
from pyrula.journal.append_log import (
    U32,
    BatchLog,
    FieldReader,
    LogRegistry,
    every_log,
    field,
    folder_for,
    read_payloads,
    stopped_logs,
)
from pyrula.journal.prepared import PreparedExchange
from pyrula.journal.records import decode
from pyrula.journal.store import Store, Txn

# A block's first recordings are committed one by one: their own commits cost less than a batch.
DIRECT_RECORDINGS = 2
FOLD_EVERY = 256
FOLD_BYTES = 8 << 20
# Recordings wait at most about this long to be seen by other processes, however slowly the
# block goes on (a burst, then a pause; calls that take seconds each).
FOLD_SECONDS = 1.0
_MAGIC = b"PYRPEND1"

log = logging.getLogger("pyrula.journal")


class Exchanges(Protocol):
    """What a pending log puts its recordings in the store through (`exchanges.Exchanges`, which
    imports this module): the store, and how one prepared exchange is put in a transaction."""

    store: Store

    def apply(self, txn: Txn, prepared: PreparedExchange) -> None: ...


class PendingLog(BatchLog):
    """This process's pending recordings for one store (`for_exchanges`): thread-safe."""

    noun = "pending recordings"

    def __init__(self, exchanges: Exchanges, folder: Path) -> None:
        super().__init__(folder, _MAGIC, "pending log", lambda: FOLD_SECONDS)
        self.exchanges = exchanges
        self._entries: list[PreparedExchange] = []
        self._keys: set[bytes] = set()
        self._sent: set[bytes] = set()
        # Cassettes kept in files whose recordings this log takes (`for_file`).
        self._file_names: set[str] = set()

    def for_file(self, name: str) -> None:
        """Cassette `name` is kept in a file: the fold that puts its recordings in the store
        notes them as ahead of its file (`file_ahead`) until the file is written."""
        with self._lock:
            self._file_names.add(name)

    def holds(self, key: bytes) -> bool:
        """Whether a recording under `key` waits here (the store does not have it yet)."""
        return key in self._keys

    def holds_sent(self, sent: bytes) -> bool:
        return sent in self._sent

    def append(self, prepared: PreparedExchange) -> None:
        """Make `prepared` durable (one write and one flush) before returning; put the batch in
        the store when it is big enough (if that fails, the batch waits for the next fold, and
        the failure is logged: this recording is kept either way)."""
        self._append(prepared, _encode(prepared), FOLD_EVERY, FOLD_BYTES)

    def _keep(self, fact: PreparedExchange) -> int:
        self._entries.append(fact)
        self._keys.add(fact.key)
        if fact.sent is not None:
            self._sent.add(fact.sent[0])
        return len(self._entries)

    def fold(self) -> int:
        """Put every pending recording in the store in one transaction; return how many. The
        log is then emptied; if the write fails, the recordings stay here (and on disk)."""
        with self._lock:
            entries = self._entries
            if not entries or self._closed:
                return 0
            exchanges = self.exchanges

            files = self._file_names

            def write(txn: Txn) -> None:
                for prepared in entries:
                    exchanges.apply(txn, prepared)
                if files:
                    keys = (prepared.key for prepared in entries)
                    file_ahead.note(txn, exchanges.store.meta_db, keys, within=files)

            exchanges.store.write(write)
            self._entries = []
            self._keys.clear()
            self._sent.clear()
            self._emptied()  # a log replayed after this adds nothing twice: `recover` skips it
            return len(entries)


def _encode(prepared: PreparedExchange) -> bytes:
    parts = [field(prepared.key), field(prepared.value)]
    parts.append(U32.pack(len(prepared.pages)))
    for key, page in prepared.pages:
        parts += (field(key), field(page))
    parts.append(U32.pack(len(prepared.blobs)))
    for digest, data in prepared.blobs:
        parts += (field(digest), field(data))
    if prepared.sent is None:
        parts.append(U32.pack(0))
    else:
        parts += (U32.pack(1), field(prepared.sent[0]), field(prepared.sent[1]))
    return b"".join(parts)


def _decode(payload: bytes) -> PreparedExchange:
    reader = FieldReader(payload)
    key, value = reader.field(), reader.field()
    pages = [(reader.field(), reader.field()) for _ in range(reader.u32())]
    blobs = [(reader.field(), reader.field()) for _ in range(reader.u32())]
    sent = (reader.field(), reader.field()) if reader.u32() else None
    record = decode(value, key)[0]
    return PreparedExchange(key, record, value, pages, blobs, sent)


def read_entries(data: bytes) -> Iterator[PreparedExchange]:
    """The whole entries of a log's current generation, in order (none for a foreign file)."""
    return read_entries_of(read_payloads(data, _MAGIC))


def read_entries_of(payloads: Iterable[bytes]) -> Iterator[PreparedExchange]:
    """The recordings of a log's payloads, up to the first that does not decode."""
    for payload in payloads:
        try:
            yield _decode(payload)
        except (ValueError, struct.error, StoreError):
            return


def read_waiting(store_folder: Path) -> Iterator[PreparedExchange]:
    """The recordings the pending logs of the store in `store_folder` hold now, stopped
    processes' and live ones' alike, without putting them in the store (what `recover` takes)."""
    for payloads in every_log(Path(store_folder) / "pending", _MAGIC):
        yield from read_entries_of(payloads)


_logs: LogRegistry[PendingLog] = LogRegistry()


def goes_to_log(recorded: int, since_last: float) -> bool:
    """Whether a block's `recorded`th recording, `since_last` seconds after the one before, is
    appended to the pending log rather than committed: not one of its first `DIRECT_RECORDINGS`,
    nor one more than `FOLD_SECONDS` after the one before (it would be folded alone: an append's
    flush more than a commit)."""
    return recorded > DIRECT_RECORDINGS and since_last <= FOLD_SECONDS


def folder_of(exchanges: Exchanges) -> Path | None:
    """Where the store of `exchanges` keeps pending logs (`append_log.folder_for`)."""
    return folder_for(exchanges.store, "pending")


def for_exchanges(exchanges: Exchanges) -> PendingLog | None:
    """This process's pending log for the store of `exchanges`, made on first use; None where
    recordings are committed straight away (`folder_of`)."""
    folder = folder_of(exchanges)
    if folder is None:
        return None
    return _logs.use(
        folder,
        lambda: PendingLog(exchanges, folder),
        lambda found: found.exchanges.store.closed,
    )


def release(pending: PendingLog) -> None:
    """A block is done with `pending`: fold it; the last block using it also deletes the file
    (so a suite of many stores keeps no file open per store)."""
    _logs.release(pending)


def recover(exchanges: Exchanges, *, again: bool = False) -> int:
    """Put in the store the recordings of pending logs whose process died (once per opening of
    the store in this process, unless `again`); return how many were put. A recording the store
    already holds, or a newer one under the same key, is skipped."""
    folder = folder_of(exchanges)
    if folder is None or not (_logs.first_opening(folder, exchanges.store) or again):
        return 0
    if not folder.is_dir():
        return 0
    put = 0
    db = exchanges.store.exchanges_db
    for path, payloads in stopped_logs(folder, _MAGIC):
        entries = list(read_entries_of(payloads))

        def write(txn: Txn, entries: list[PreparedExchange] = entries) -> int:
            put = []
            for prepared in entries:
                old = txn.get(prepared.key, db=db)
                if old is not None and _not_older(bytes(old), prepared):
                    continue
                exchanges.apply(txn, prepared)
                put.append(prepared.key)
            # Whether their cassette is kept in a file is not known here: noted for any.
            file_ahead.note(txn, exchanges.store.meta_db, put)
            return len(put)

        done = exchanges.store.write(write) if entries else 0
        if done:
            log.warning(
                "put %d recording(s) left pending by a stopped process (%s) in %s",
                done,
                path.name,
                exchanges.store.location,
            )
        put += done
    return put


def _not_older(old: bytes, prepared: PreparedExchange) -> bool:
    """Whether the stored value is this recording or a newer one under its key."""
    if old == prepared.value:
        return True
    try:
        return decode(old)[0].recorded_at >= prepared.record.recorded_at
    except StoreError:
        return False


atexit.register(_logs.close_all)


__all__ = [
    "DIRECT_RECORDINGS",
    "FOLD_BYTES",
    "FOLD_EVERY",
    "PendingLog",
    "for_exchanges",
    "goes_to_log",
    "read_entries",
    "read_waiting",
    "recover",
    "release",
]
