"""A process's durable append-only log file beside an LMDB store: one write and one flush a
record, with no file metadata touched, for facts that are put in the store later, in batches.

An LMDB commit flushes the disk twice, over pages scattered across its B-trees. Appending the
same fact to a file costs one flush of contiguous bytes written into space zeroed ahead of time.
Two kinds of fact use it: a cassette block's recordings (`pending.py`) and a run's facts while
its worker executes it alone (`pyrula.runtime.fact_log`). Each keeps its own folder of logs and
its own payload format; this module owns only the file:

    header:  magic (8 bytes) | u64 generation
    entry:   u32 length | u32 CRC-32 of the body | body
    body:    u64 generation | payload

Once a log's entries are in the store, `restart` bumps the generation in the header and the next
entries are written from the start again, over the old ones; a reader keeps the entries of the
header's generation up to the first that is not whole (`read_payloads`). A log is made and
`flock`ed under a `.new` name, then renamed, and stays locked while its process uses it: a log
whose lock is free belongs to a process that stopped, and the next opener of the store puts its
entries in the store, then deletes it (`stopped_logs`), whichever name a crash left it under.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from pyrula.errors import StoreError, StoreFull
from pyrula.journal.fold_timer import FoldTimer
from pyrula.journal.lmdb_store import free_bytes
from pyrula.journal.store import Store

# Zeros written past the end, so an append's flush never grows the file: 64 KiB at first, then
# as much again as the file holds, up to 1 MiB at a time.
_AHEAD_FIRST = 64 << 10
_AHEAD_MOST = 1 << 20
# A `*.new` log older than this was left by a process killed while making it.
UNFINISHED_SECONDS = 60.0
_HEADER = struct.Struct(">8sQ")
_ENTRY = struct.Struct(">II")
_U64 = struct.Struct(">Q")
U32 = struct.Struct(">I")

log = logging.getLogger("pyrula.journal")


def folder_for(store: Store, name: str) -> Path | None:
    """Where `store` keeps its logs of one kind (`name`): a local store that flushes its
    commits, opened for writing. None elsewhere: a store that does not flush has nothing to
    gain, and a remote or read-only one cannot have them."""
    if store.remote or store.readonly or store.folder is None or not store.syncs:
        return None
    return store.folder / name


class AppendLog:
    """One log file of this process: `append` is durable when it returns. Not thread-safe: its
    owner serialises its calls."""

    def __init__(self, folder: Path, magic: bytes, what: str) -> None:
        """`magic`: the 8 bytes that say whose log this is; `what` names it in errors."""
        self.magic = magic
        self.what = what
        self.pid = os.getpid()
        self.path = folder / f"{self.pid}-{os.urandom(4).hex()}.log"
        self.generation = 1
        self.end = self._allocated = _HEADER.size  # the header is written; zeros go after it
        making = self.path.with_suffix(".new")  # so a recovering process never finds it unlocked
        try:
            folder.mkdir(exist_ok=True)
            self._fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise self._cannot_write(exc) from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # held while in use: `stopped_logs` skips it
            # The header, and zeros for the first entries: the first append's flush makes them
            # durable with itself (and the file's new blocks), so they need no flush of their own.
            self._write(_HEADER.pack(magic, self.generation) + bytes(_AHEAD_FIRST), 0)
            self._allocated = _HEADER.size + _AHEAD_FIRST
            os.rename(making, self.path)
        except BaseException as exc:
            os.close(self._fd)
            making.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise self._cannot_write(exc) from exc
            raise

    @property
    def used(self) -> int:
        """Bytes of entries written since the log was last restarted."""
        return self.end - _HEADER.size

    def append(self, payload: bytes) -> None:
        """Write one entry and flush it: it is on disk when this returns. A full disk is
        `StoreFull` naming the log; an entry that failed was never acknowledged."""
        body = _U64.pack(self.generation) + payload
        entry = _ENTRY.pack(len(body), zlib.crc32(body)) + body
        if self.end + len(entry) > self._allocated:
            self._write_ahead(self.end + len(entry))
        self._write(entry, self.end, flush=True)
        self.end += len(entry)

    def restart(self) -> None:
        """Drop every entry (they are in the store now): a new generation, written from the
        start. Made durable by the next append's flush; until then a crash replays entries the
        store already holds, which each reader of its logs must take in its stride."""
        self.generation += 1
        self.end = _HEADER.size
        os.pwrite(self._fd, _HEADER.pack(self.magic, self.generation), 0)

    def close(self, *, delete: bool) -> None:
        """Close the file (and so its lock); delete it first when its entries are all kept."""
        if delete:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)

    def _write_ahead(self, needed: int) -> None:
        """Zeros from the allocated end past `needed`: the file grows here only, so only the
        append that follows (whose flush takes them along) changes its metadata."""
        ahead = min(max(_AHEAD_FIRST, self._allocated), _AHEAD_MOST)
        size = max(self._allocated, needed) + ahead
        self._write(bytes(size - self._allocated), self._allocated)
        self._allocated = size

    def _write(self, data: bytes, offset: int, *, flush: bool = False) -> None:
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
        folder = self.path.parent
        store = folder.parent
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            free = free_bytes(folder if folder.exists() else store)
            return StoreFull(store, free, f"its {self.what} {self.path.name}: {exc}")
        return StoreError(f"the store at {store} could not write its {self.what}: {exc}")


def read_payloads(data: bytes, magic: bytes) -> Iterator[bytes]:
    """The payloads of a log's current generation, in order, up to the first entry that is not
    whole (none for a file that is not a log of `magic`)."""
    if len(data) < _HEADER.size:
        return
    found, generation = _HEADER.unpack_from(data, 0)
    if found != magic:
        return
    at = _HEADER.size
    while at + _ENTRY.size <= len(data):
        length, crc = _ENTRY.unpack_from(data, at)
        body = data[at + _ENTRY.size : at + _ENTRY.size + length]
        if length < _U64.size or len(body) != length or zlib.crc32(body) != crc:
            return
        if _U64.unpack_from(body, 0)[0] != generation:
            return
        yield body[_U64.size :]
        at += _ENTRY.size + length


def every_log(folder: Path, magic: bytes) -> Iterator[Iterator[bytes]]:
    """The payloads of each log in `folder`, stopped processes' and live ones' alike, read as
    they are now (nothing is locked, put in the store or deleted). A `*.new` log holds entries
    only when a crash undid its rename (`stopped_logs`)."""
    for path in _logs_in(folder):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue  # recovered, or renamed, meanwhile
        yield read_payloads(data, magic)


def _logs_in(folder: Path) -> list[Path]:
    """The logs in `folder`, those renamed (`*.log`) first."""
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.log")) + sorted(folder.glob("*.new"))


def stopped_logs(folder: Path, magic: bytes) -> Iterator[tuple[Path, list[bytes]]]:
    """Each log in `folder` whose process stopped, locked, with its payloads. The consumer puts
    them in the store; when it asks for the next log, the one before is deleted (if it raises,
    that log stays for the next opener).

    A log still named `*.new` is one of two things. Most often a process was killed while
    making it: it holds no entry, and is deleted once it is old enough not to be a live
    process's about to take its lock. Or its rename to `*.log` was lost: a crash soon after it,
    on a file system that does not keep a rename with the file's own flush (nothing makes the
    folder durable). Then its entries are durable, and recovered like any stopped log's."""
    for path in _logs_in(folder):
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # another process recovered it
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process is alive
            try:
                if os.stat(path).st_ino != os.fstat(fd).st_ino:
                    continue  # recovered and replaced meanwhile
            except FileNotFoundError:
                continue
            with open(fd, "rb", closefd=False) as handle:
                payloads = list(read_payloads(handle.read(), magic))
            if path.suffix == ".new" and not payloads:
                if _unfinished_long_ago(path):
                    path.unlink(missing_ok=True)
                continue
            yield path, payloads
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _unfinished_long_ago(path: Path) -> bool:
    """Whether an empty `*.new` log was made over `UNFINISHED_SECONDS` ago: then the process that
    made it was killed before locking it. One made this minute may be a live process's, about to
    take its lock, and is left."""
    try:
        return time.time() - path.stat().st_mtime > UNFINISHED_SECONDS
    except FileNotFoundError:
        return False


def field(data: bytes) -> bytes:
    """One length-prefixed field of a payload (`FieldReader.field` reads it back)."""
    return U32.pack(len(data)) + data


class FieldReader:
    """Reads a payload's fields in order; a field that runs past the payload is `ValueError`."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def u32(self) -> int:
        (value,) = U32.unpack_from(self.data, self.at)
        self.at += 4
        return int(value)

    def field(self) -> bytes:
        length = self.u32()
        if self.at + length > len(self.data):
            raise ValueError("a field runs past its entry")
        value = self.data[self.at : self.at + length]
        self.at += length
        return value


class BatchLog:
    """What a log of facts waiting to be put in the store shares, whatever the facts: the file,
    a lock, appending, the fold timer, and closing. A subclass holds its facts (`_keep`) and puts
    them in the store (`fold`, under `_lock`; it calls `_emptied` once they are in)."""

    noun = "entries"  # what it holds, for log lines

    def __init__(
        self, folder: Path, magic: bytes, what: str, fold_seconds: Callable[[], float]
    ) -> None:
        self._log = AppendLog(folder, magic, what)
        self.what = what
        self.pid = self._log.pid
        self.path = self._log.path
        self._lock = threading.Lock()
        self.users = 0  # counted by its `LogRegistry`
        # Folds what waits once the oldest has waited `fold_seconds()` (started by an append).
        self._timer = FoldTimer(self._fold_logged, fold_seconds)
        self._closed = False

    def fold(self) -> int:
        raise NotImplementedError

    def _keep(self, fact: Any) -> int:
        """Under `_lock`: hold `fact`, just appended, until a fold; return how many wait."""
        raise NotImplementedError

    def _append(self, fact: Any, payload: bytes, every: int, most: int) -> None:
        """Make `fact`, encoded as `payload`, durable (one write and one flush) before returning,
        and `_keep` it. Once `every` facts wait, or the log holds `most` bytes, they are put in
        the store (a failure there is logged: what is appended is kept either way); else the
        timer is started."""
        with self._lock:
            if self._closed:
                raise StoreError(f"the {self.what} {self.path} was closed; open the store again")
            self._log.append(payload)
            full = self._keep(fact) >= every or self._log.used >= most
            if not full:
                self._timer.start()
        if full:
            self._fold_logged()

    def _emptied(self) -> None:
        """Under `_lock`, once a fold has put every fact in the store: the log starts afresh.
        A crash before the next append's flush replays facts the store has, which each kind's
        recovery takes in its stride."""
        self._timer.cancel()
        self._log.restart()

    def _fold_logged(self) -> None:
        """`fold`, for a caller with nobody to raise to (an append whose entry is already
        durable, the timer's thread): a failure is logged, and the entries stay for the next
        fold."""
        try:
            self.fold()
        except Exception as exc:
            log.warning("%s in %s wait for the next fold: %s", self.noun, self.path, exc)

    def close(self, *, quiet: bool = False) -> None:
        """Fold what is logged and delete the log. If the fold fails, the file stays (the next
        opener of the store recovers it) and the error is raised, or logged when `quiet`."""
        if os.getpid() != self.pid:
            return
        try:
            self.fold()
        except StoreError as exc:
            self._shut(delete=False)  # its lock goes with it: the log is now a stopped one's
            if not quiet:
                raise
            log.error("%s stay in %s for the next opener: %s", self.noun, self.path, exc)
            return
        self._shut(delete=True)

    def _shut(self, *, delete: bool) -> None:
        with self._lock:  # a timer's fold after this finds the log closed
            self._closed = True
            self._timer.stop()
            self._log.close(delete=delete)


L = TypeVar("L", bound=BatchLog)


class LogRegistry(Generic[L]):
    """This process's log of one kind per store folder, shared by its users (cassette blocks,
    attempts) and closed with the last of them, or at exit."""

    def __init__(self) -> None:
        self._logs: dict[str, L] = {}
        self._pins: dict[str, int] = {}  # folders whose log outlives its users (`pin`)
        self._opened: set[tuple[str, int]] = set()  # `first_opening`
        self.lock = threading.Lock()

    def first_opening(self, folder: Path, store: Store) -> bool:
        """Whether this is the first time this process asks about `folder` for this opening of
        its store (the stopped logs there are recovered once per opening)."""
        opened = (str(folder), id(store.shared_handle()))
        with self.lock:
            first = opened not in self._opened
            self._opened.add(opened)
        return first

    def pin(self, folder: Path) -> None:
        """Keep `folder`'s log open between users until `unpin` (a worker keeps its fact log
        from one run to the next, rather than making a file for each)."""
        with self.lock:
            self._pins[str(folder)] = self._pins.get(str(folder), 0) + 1

    def unpin(self, folder: Path) -> None:
        """Undo one `pin`; the log is closed now if nothing else uses or pins it."""
        where = str(folder)
        with self.lock:
            self._pins[where] -= 1
            if self._pins[where]:
                return
            del self._pins[where]
            found = self._logs.get(where)
            if found is None or found.users or found.pid != os.getpid():
                return
            del self._logs[where]
        found.close()

    def use(self, folder: Path, make: Callable[[], L], stale: Callable[[L], bool]) -> L:
        """The log for `folder` counted as one more user, made by `make` if there is none (or
        the one there is `stale`: another process's, or its store's closed)."""
        with self.lock:
            found = self._logs.get(str(folder))
            if found is None or found.pid != os.getpid() or stale(found):
                found = self._logs[str(folder)] = make()
            found.users += 1
            return found

    def current(self, folder: Path) -> L | None:
        with self.lock:
            return self._logs.get(str(folder))

    def release(self, used: L) -> None:
        """A user is done with `used`: fold it; the last user also deletes the file (so a
        suite of many stores keeps no file open per store)."""
        where = str(used.path.parent)
        with self.lock:
            used.users -= 1
            last = used.users == 0 and not self._pins.get(where)
            if last and self._logs.get(where) is used:
                del self._logs[where]
        if last:
            used.close()
        else:
            used.fold()

    def close_all(self) -> None:
        with self.lock:
            logs = list(self._logs.values())
            self._logs.clear()
        for each in logs:
            each.close(quiet=True)


__all__ = [
    "U32",
    "UNFINISHED_SECONDS",
    "AppendLog",
    "BatchLog",
    "FieldReader",
    "LogRegistry",
    "every_log",
    "field",
    "folder_for",
    "read_payloads",
    "stopped_logs",
]
