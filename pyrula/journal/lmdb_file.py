"""What an LMDB data file's two meta pages say about it, read without mapping the file.

LMDB maps `data.mdb` into memory and trusts it: a file cut short (a copy interrupted, a disk that
filled during `cp`) is mapped past its end, and the first read there kills the process with
SIGBUS. Each meta page names the last page in use, so comparing that with the file's length finds
a truncated file before LMDB maps it.

Layout (LMDB 0.9, the format the `lmdb` binding builds): a 16-byte page header, then the meta:
magic u32, version u32, address u64, map size u64, two database records of 48 bytes (the first
one's leading u32 holds the page size), the last page number u64 and the transaction id u64.
Fields are in the writing machine's byte order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

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
    metas = [meta] + ([second] if second is not None else [])
    newest = max(metas, key=lambda m: m.txnid)
    needed = max(2, newest.last_page + 1) * meta.page_size
    if length < needed:
        return length, needed
    return None
