"""What an LMDB data file's two meta pages say about it, read without mapping the file.

LMDB maps `data.mdb` into memory and trusts it: a file cut short (a copy interrupted, a disk that
filled during `cp`) is mapped past its end, and the first read there kills the process with
SIGBUS. Each meta page names the last page in use, so comparing that with the file's length finds
a truncated file before LMDB maps it.

Layout (LMDB 0.9, the format the `lmdb` binding builds): a 16-byte page header, then the meta:
magic u32, version u32, address u64, map size u64, two database records of 48 bytes (the first
one's leading u32 holds the page size), the last page number u64 and the transaction id u64.
Fields are in the writing machine's byte order.

A file cut short while a process has it open is caught the same way, by `LengthWatch`, before
each transaction: one `stat`, and two small `pread`s when the file changed; never a touch of the
map. What it cannot
catch is a cut made after the check, while a transaction is reading (docs/record-format.md).

`check_data_file` runs these checks, and refuses what is no data file at all (a folder, a pipe,
a link to nothing), before a store is opened; `unusable` words a file-system refusal (no
permission, a read-only disk, a file in the way) as the store error naming the fix.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from pyrula.errors import NotAStore, StoreCorrupt, StoreError

_MAGIC = 0xBEEFC0DE
_PAGE_HEADER = 16
_META_BYTES = 136


@dataclass(frozen=True, slots=True)
class Meta:
    """One meta page: the page size, the last page in use and the transaction that wrote it."""

    page_size: int
    last_page: int
    txnid: int


def read_meta(page: bytes) -> Meta | None:
    """The meta record at the start of `page`, or None when it is not one (in either byte order)."""
    if len(page) < _PAGE_HEADER + _META_BYTES:
        return None
    for order in ("<", ">"):
        magic, _version = struct.unpack_from(order + "II", page, _PAGE_HEADER)
        if magic != _MAGIC:
            continue
        (page_size,) = struct.unpack_from(order + "I", page, _PAGE_HEADER + 24)
        last_page, txnid = struct.unpack_from(order + "QQ", page, _PAGE_HEADER + 120)
        return Meta(page_size, last_page, txnid)
    return None


def missing_bytes(data: Path) -> tuple[int, int] | None:
    """`(length, needed)` when `data` is shorter than its newest meta page says it must be;
    None when it is long enough or when it is not an LMDB file at all (LMDB says so itself)."""
    length = data.stat().st_size
    with data.open("rb") as handle:
        first = handle.read(_PAGE_HEADER + _META_BYTES)
        meta = read_meta(first)
        if meta is None or not 512 <= meta.page_size <= 1 << 16:
            return None
        handle.seek(meta.page_size)
        second = read_meta(handle.read(_PAGE_HEADER + _META_BYTES))
        # Another process may have committed since the `stat` above: its pages reach the file
        # before its meta page does, so the length read after the metas covers them.
        length = max(length, os.fstat(handle.fileno()).st_size)
    metas = [meta] + ([second] if second is not None else [])
    newest = max(metas, key=lambda m: m.txnid)
    needed = max(2, newest.last_page + 1) * meta.page_size
    if length < needed:
        return length, needed
    return None


def check_data_file(data: Path) -> None:
    """Refuse a `data.mdb` LMDB must not be handed: not a regular file (a folder, a pipe that
    would block the open, a link to nothing), empty, or shorter than its own header says (LMDB
    would map past its end). Nothing is changed; the error names the file and the fix."""
    if data.is_symlink() and not data.exists():
        raise NotAStore(
            f"{data} is a link to {os.readlink(data)}, which does not exist; restore what it "
            "points at, or point PYRULA_STORE at another folder"
        )
    if not data.is_file():
        what = "a folder" if data.is_dir() else "not a regular file"
        raise NotAStore(
            f"{data} is {what}, where a Pyrula store keeps its LMDB data file; move it away "
            "(nothing of it was read or changed), or point PYRULA_STORE at another folder"
        )
    if data.stat().st_size == 0:
        raise StoreCorrupt(
            f"{data} is empty (0 bytes), not an LMDB data file; restore it from a copy or point "
            "PYRULA_STORE at another folder"
        )
    short = missing_bytes(data)
    if short is not None:
        raise StoreCorrupt(
            f"{data} is truncated: {short[0]:,} bytes where its own header names "
            f"{short[1]:,} (was it copied while being written, or onto a full disk?); "
            "restore it from a copy"
        )


def unusable(path: Path, exc: OSError) -> StoreError:
    """A store this process cannot reach through the file system, as the typed error that
    names what to change."""
    where = exc.filename if exc.filename is not None else path
    what = f"cannot use {where} for the store at {path}: {exc.strerror or exc}"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return StoreError(f"{what}; let this user read and write it (chmod, chown), or use another")
    if exc.errno == errno.EROFS:
        return StoreError(f"{what}; copy the store to a writable disk, or open it read-only")
    if exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return NotAStore(f"{what}; a file is in the way: point PYRULA_STORE at a folder")
    return StoreError(f"{what}; check the path (--store, PYRULA_STORE)")


class LengthWatch:
    """Checks, before each transaction, that `data.mdb` still holds every page its newest meta
    page names (the file may have been cut since it was opened; reading a mapped page past its
    end would kill the process with SIGBUS). It keeps no descriptor open: a `stat` of the path
    per check, and the metas read again only when the file's length or time changed."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self._path = str(data)  # `os.stat` of a str skips `Path.__fspath__`, once a transaction
        with data.open("rb") as handle:
            meta = read_meta(handle.read(_PAGE_HEADER + _META_BYTES))
        self._page = meta.page_size if meta is not None else 4096
        self._whole: tuple[int, int] | None = None  # (length, mtime) last found whole

    def shortfall(self) -> tuple[int, int] | None:
        """`(length, needed)` when the file is now shorter than its pages in use; else None."""
        try:
            stat = os.stat(self._path)
        except FileNotFoundError:
            return 0, 2 * self._page
        seen = (stat.st_size, stat.st_mtime_ns)
        if seen == self._whole:
            return None
        short = self._measure(stat.st_size)
        if short is None:
            self._whole = seen
        return short

    def committed(self, last_page: int) -> None:
        """After this process committed a write whose newest meta names `last_page`: its pages
        are in the file, so a file at least that long is noted whole (one `stat`, where the
        next check would otherwise read the metas again because the commit changed the file's
        length or time). A file found shorter is left for the next check to measure."""
        try:
            stat = os.stat(self._path)
        except FileNotFoundError:
            return
        if stat.st_size >= (last_page + 1) * self._page:
            self._whole = (stat.st_size, stat.st_mtime_ns)

    def _measure(self, length: int) -> tuple[int, int] | None:
        page = self._page
        if length < 2 * page:  # not even both meta pages: LMDB would read them from the map
            return length, 2 * page
        size = _PAGE_HEADER + _META_BYTES
        fd = os.open(self.data, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            metas = [read_meta(os.pread(fd, size, 0)), read_meta(os.pread(fd, size, page))]
            # A writer in another process may have committed between the caller's `stat` and
            # these reads. LMDB writes a transaction's pages before its meta page, so the
            # length taken after reading the metas holds every page they name unless the file
            # really was cut.
            length = max(length, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        found = [meta for meta in metas if meta is not None]
        if not found:
            return None  # not readable as metas: LMDB reports that damage itself, no SIGBUS
        needed = (max(found, key=lambda m: m.txnid).last_page + 1) * page
        return (length, needed) if length < needed else None
