"""Recordings made durable by one append to a log, and put in the store in batches.

An LMDB commit flushes the disk twice, and an exchange's commit dirties pages scattered over
several B-trees (the record, its request's blobs, the sent index): on most disks that costs more
than the live call it records. Inside a cassette block, a recording is instead appended to this
process's pending log (`<store>/pending/<pid>-<random>.log`) and flushed once: contiguous bytes
in space written ahead of time, so the flush touches no file metadata. The recordings are then
put in the store together, in one transaction, when the block ends, or sooner: after
`FOLD_EVERY` recordings or `FOLD_BYTES` bytes, or `FOLD_SECONDS` after the first of them (a
timer). So a recording is on disk when the call returns, exactly as before; other processes see
it when its batch is put in the store.

The log holds what the store would: scrubbed requests, replies as kept. Its layout:

    header:  b"PYRPEND1" | u64 generation
    entry:   u32 length | u32 CRC-32 of the payload | payload
    payload: u64 generation | key | value | pages | blobs | sent        (`_encode`)

After a batch is in the store the generation is bumped in the header and the next entries are
written from the start again, over the old ones; a reader keeps the entries of the header's
generation up to the first that is not whole. A log whose process died (its `flock` is free) is
put in the store by the next process that opens the store's exchanges (`recover`), then deleted.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pyrula.errors import StoreError, StoreFull
from pyrula.journal.lmdb_store import free_bytes
from pyrula.journal.records import decode
from pyrula.journal.store import Txn

if TYPE_CHECKING:
    from pyrula.journal.exchanges import Exchanges, PreparedExchange

# A block's first recordings are committed one by one: their own commits cost less than a batch.
DIRECT_RECORDINGS = 2
FOLD_EVERY = 256
FOLD_BYTES = 8 << 20
# Recordings wait at most about this long to be seen by other processes, however slowly the
# block goes on (a burst, then a pause; calls that take seconds each).
FOLD_SECONDS = 1.0
# Zeros written past the end, so an append's flush never grows the file: 64 KiB at first, then
# as much again as the file holds, up to 1 MiB at a time.
_AHEAD_FIRST = 64 << 10
_AHEAD_MOST = 1 << 20
_MAGIC = b"PYRPEND1"
# A `*.new` log older than this was left by a process killed while making it.
_UNFINISHED_SECONDS = 60.0
_HEADER = struct.Struct(">8sQ")
_ENTRY = struct.Struct(">II")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")

log = logging.getLogger("pyrula.journal")


class PendingLog:
    """This process's pending recordings for one store (`for_exchanges`): thread-safe."""

    def __init__(self, exchanges: Exchanges, folder: Path) -> None:
        self.exchanges = exchanges
        self.pid = os.getpid()
        self.path = folder / f"{self.pid}-{os.urandom(4).hex()}.log"
        self._lock = threading.Lock()
        self.users = 0  # the blocks using it (`for_exchanges`, `release`)
        self._generation = 1
        self._entries: list[PreparedExchange] = []
        self._keys: set[bytes] = set()
        self._sent: set[bytes] = set()
        # Folds what waits once the oldest has waited FOLD_SECONDS (started by an append).
        self._timer: threading.Timer | None = None
        self._closed = False
        self._end = self._allocated = _HEADER.size  # the header is written; zeros go after it
        # Made and locked under another name, so `recover` never finds it unlocked.
        making = self.path.with_suffix(".new")
        try:
            folder.mkdir(exist_ok=True)
            self._fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise self._cannot_write(exc) from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # held while in use: `recover` skips it
            self._write(_HEADER.pack(_MAGIC, self._generation), 0)
            os.rename(making, self.path)
        except BaseException as exc:
            os.close(self._fd)
            making.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise self._cannot_write(exc) from exc
            raise

    def holds(self, key: bytes) -> bool:
        """Whether a recording under `key` waits here (the store does not have it yet)."""
        return key in self._keys

    def holds_sent(self, sent: bytes) -> bool:
        return sent in self._sent

    def append(self, prepared: PreparedExchange) -> None:
        """Make `prepared` durable (one write and one flush) before returning; put the batch in
        the store when it is big enough (if that fails, the batch waits for the next fold, and
        the failure is logged: this recording is kept either way)."""
        with self._lock:  # the generation too: a fold may bump it
            payload = _encode(self._generation, prepared)
            entry = _ENTRY.pack(len(payload), zlib.crc32(payload)) + payload
            if self._end + len(entry) > self._allocated:
                self._write_ahead(self._end + len(entry))
            self._write(entry, self._end, flush=True)
            self._end += len(entry)
            self._entries.append(prepared)
            self._keys.add(prepared.key)
            if prepared.sent is not None:
                self._sent.add(prepared.sent[0])
            full = len(self._entries) >= FOLD_EVERY or self._end - _HEADER.size >= FOLD_BYTES
            if not full and self._timer is None:
                self._timer = threading.Timer(FOLD_SECONDS, self._fold_late)
                self._timer.daemon = True
                self._timer.start()
        if full:
            self._fold_logged()

    def _fold_late(self) -> None:
        """The timer's fold: the oldest pending recording has waited `FOLD_SECONDS`."""
        with self._lock:
            self._timer = None  # it has fired: the next append starts another
        self._fold_logged()

    def _fold_logged(self) -> None:
        """`fold`, for a caller with nobody to raise to (an append whose recording is already
        durable, the timer's thread): a failure is logged, and the recordings stay for the next
        fold (the block's end at the latest)."""
        try:
            self.fold()
        except Exception as exc:
            log.warning("pending recordings in %s wait for the next fold: %s", self.path, exc)

    def fold(self) -> int:
        """Put every pending recording in the store in one transaction; return how many. The
        log is then emptied; if the write fails, the recordings stay here (and on disk)."""
        with self._lock:
            entries = self._entries
            if not entries or self._closed:
                return 0
            exchanges = self.exchanges

            def write(txn: Txn) -> None:
                for prepared in entries:
                    exchanges.apply(txn, prepared)

            exchanges.store.write(write)
            self._generation += 1
            self._entries = []
            self._keys.clear()
            self._sent.clear()
            self._end = _HEADER.size
            if self._timer is not None:
                self._timer.cancel()  # a no-op when the timer is what is folding
                self._timer = None
            # Made durable by the next append's flush: until then a crash replays entries the
            # store already holds, which `recover` skips.
            os.pwrite(self._fd, _HEADER.pack(_MAGIC, self._generation), 0)
            return len(entries)

    def close(self, *, quiet: bool = False) -> None:
        """Fold what is pending and delete the log. If the fold fails, the file stays (the next
        opener of the store recovers it) and the error is raised, or logged when `quiet`."""
        if os.getpid() != self.pid:
            return
        try:
            self.fold()
        except StoreError as exc:
            self._shut()  # and with the file its lock: the log is now a stopped one's
            if not quiet:
                raise
            log.error("pending recordings stay in %s for the next opener: %s", self.path, exc)
            return
        self.path.unlink(missing_ok=True)
        self._shut()

    def _shut(self) -> None:
        with self._lock:  # a timer's fold after this finds the log closed
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            os.close(self._fd)

    def _write_ahead(self, needed: int) -> None:
        """Zeros from the allocated end past `needed`, flushed once (the file grows here only)."""
        ahead = min(max(_AHEAD_FIRST, self._allocated), _AHEAD_MOST)
        size = max(self._allocated, needed) + ahead
        self._write(bytes(size - self._allocated), self._allocated, flush=True)
        self._allocated = size

    def _write(self, data: bytes, offset: int, *, flush: bool = False) -> None:
        """Write `data` at `offset` (and flush the file): a full disk is `StoreFull`, naming the
        log; what it failed to write was never acknowledged."""
        try:
            written = os.pwrite(self._fd, data, offset)
            if written != len(data):
                raise OSError(errno.ENOSPC, "short write")
            if flush:
                os.fdatasync(self._fd)
        except OSError as exc:
            raise self._cannot_write(exc) from exc

    def _cannot_write(self, exc: OSError) -> StoreError:
        """The error for a failed write of the log: `StoreFull` naming it for a full disk."""
        store = self.path.parent.parent
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            free = free_bytes(self.path.parent if self.path.parent.exists() else store)
            return StoreFull(store, free, f"its pending log {self.path.name}: {exc}")
        return StoreError(f"the store at {store} could not write its pending log: {exc}")


def _field(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def _encode(generation: int, prepared: PreparedExchange) -> bytes:
    parts = [_U64.pack(generation), _field(prepared.key), _field(prepared.value)]
    parts.append(_U32.pack(len(prepared.pages)))
    for key, page in prepared.pages:
        parts += (_field(key), _field(page))
    parts.append(_U32.pack(len(prepared.blobs)))
    for digest, data in prepared.blobs:
        parts += (_field(digest), _field(data))
    if prepared.sent is None:
        parts.append(_U32.pack(0))
    else:
        parts += (_U32.pack(1), _field(prepared.sent[0]), _field(prepared.sent[1]))
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def u32(self) -> int:
        (value,) = _U32.unpack_from(self.data, self.at)
        self.at += 4
        return int(value)

    def field(self) -> bytes:
        length = self.u32()
        if self.at + length > len(self.data):
            raise ValueError("a field runs past its entry")
        value = self.data[self.at : self.at + length]
        self.at += length
        return value


def _decode(payload: bytes) -> tuple[int, PreparedExchange]:
    from pyrula.journal.exchanges import PreparedExchange

    (generation,) = _U64.unpack_from(payload, 0)
    reader = _Reader(payload)
    reader.at = 8
    key, value = reader.field(), reader.field()
    pages = [(reader.field(), reader.field()) for _ in range(reader.u32())]
    blobs = [(reader.field(), reader.field()) for _ in range(reader.u32())]
    sent = (reader.field(), reader.field()) if reader.u32() else None
    record = decode(value, key)[0]
    return generation, PreparedExchange(key, record, value, pages, blobs, sent)


def read_entries(data: bytes) -> Iterator[PreparedExchange]:
    """The whole entries of a log's current generation, in order (none for a foreign file)."""
    if len(data) < _HEADER.size:
        return
    magic, generation = _HEADER.unpack_from(data, 0)
    if magic != _MAGIC:
        return
    at = _HEADER.size
    while at + _ENTRY.size <= len(data):
        length, crc = _ENTRY.unpack_from(data, at)
        payload = data[at + _ENTRY.size : at + _ENTRY.size + length]
        if length == 0 or len(payload) != length or zlib.crc32(payload) != crc:
            return
        try:
            found_generation, prepared = _decode(payload)
        except (ValueError, struct.error, StoreError):
            return
        if found_generation != generation:
            return
        yield prepared
        at += _ENTRY.size + length


_logs: dict[str, PendingLog] = {}
_recovered: set[tuple[str, int]] = set()
_logs_lock = threading.Lock()


def goes_to_log(recorded: int, since_last: float) -> bool:
    """Whether a block's `recorded`th recording, `since_last` seconds after the one before, is
    appended to the pending log rather than committed: not one of its first `DIRECT_RECORDINGS`,
    nor one more than `FOLD_SECONDS` after the one before (it would be folded alone: an append's
    flush more than a commit)."""
    return recorded > DIRECT_RECORDINGS and since_last <= FOLD_SECONDS


def folder_of(exchanges: Exchanges) -> Path | None:
    """Where a store keeps pending logs: a local store that flushes its commits (one that does
    not flush has nothing to gain), opened for writing."""
    store = exchanges.store
    if store.remote or store.readonly or store.folder is None or not store.syncs:
        return None
    return store.folder / "pending"


def for_exchanges(exchanges: Exchanges) -> PendingLog | None:
    """This process's pending log for the store of `exchanges`, made on first use; None where
    recordings are committed straight away (`folder_of`)."""
    folder = folder_of(exchanges)
    if folder is None:
        return None
    where = str(folder)
    with _logs_lock:
        found = _logs.get(where)
        if found is None or found.pid != os.getpid() or found.exchanges.store.closed:
            found = PendingLog(exchanges, folder)
            _logs[where] = found
        found.users += 1
        return found


def release(pending: PendingLog) -> None:
    """A block is done with `pending`: fold it; the last block using it also deletes the file
    (so a suite of many stores keeps no file open per store)."""
    with _logs_lock:
        pending.users -= 1
        last = pending.users == 0
        if last and _logs.get(str(pending.path.parent)) is pending:
            del _logs[str(pending.path.parent)]
    if last:
        pending.close()
    else:
        pending.fold()


def recover(exchanges: Exchanges, *, again: bool = False) -> int:
    """Put in the store the recordings of pending logs whose process died (once per opening of
    the store in this process, unless `again`); return how many were put. A recording the store
    already holds, or a newer one under the same key, is skipped."""
    folder = folder_of(exchanges)
    if folder is None:
        return 0
    opened = (str(folder), id(exchanges.store.shared_handle()))
    with _logs_lock:
        if opened in _recovered and not again:
            return 0
        _recovered.add(opened)
    if not folder.is_dir():
        return 0
    put = 0
    for path in sorted(folder.glob("*.log")):
        put += _recover_one(exchanges, path)
    _sweep_unfinished(folder)
    return put


def _sweep_unfinished(folder: Path) -> None:
    """Delete logs a process was killed while making (`*.new`, never renamed): they hold no
    recording. One made this minute may be a live process's, not yet locked, and is left."""
    for path in folder.glob("*.new"):
        try:
            if time.time() - path.stat().st_mtime > _UNFINISHED_SECONDS:
                path.unlink()
        except FileNotFoundError:
            pass


def _recover_one(exchanges: Exchanges, path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0  # another process recovered it
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # its process is alive
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                return 0  # recovered and replaced meanwhile
        except FileNotFoundError:
            return 0
        with open(fd, "rb", closefd=False) as handle:
            entries = list(read_entries(handle.read()))
        db = exchanges.store.exchanges_db

        def write(txn: Txn) -> int:
            count = 0
            for prepared in entries:
                old = txn.get(prepared.key, db=db)
                if old is not None and _not_older(bytes(old), prepared):
                    continue
                exchanges.apply(txn, prepared)
                count += 1
            return count

        put = exchanges.store.write(write) if entries else 0
        path.unlink(missing_ok=True)
        if put:
            log.warning(
                "put %d recording(s) left pending by a stopped process (%s) in %s",
                put,
                path.name,
                exchanges.store.location,
            )
        return put
    finally:
        os.close(fd)


def _not_older(old: bytes, prepared: PreparedExchange) -> bool:
    """Whether the stored value is this recording or a newer one under its key."""
    if old == prepared.value:
        return True
    try:
        return decode(old)[0].recorded_at >= prepared.record.recorded_at
    except StoreError:
        return False


@atexit.register
def _close_all() -> None:
    with _logs_lock:
        logs = list(_logs.values())
        _logs.clear()
    for pending in logs:
        pending.close(quiet=True)


__all__ = [
    "DIRECT_RECORDINGS",
    "FOLD_BYTES",
    "FOLD_EVERY",
    "PendingLog",
    "for_exchanges",
    "goes_to_log",
    "read_entries",
    "recover",
    "release",
]
