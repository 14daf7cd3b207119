"""Which recordings of a text cassette (`cassette_file`) the store holds and its file does not.

A block writes its cassette's file when it ends. A recording process killed first leaves its
recordings in the store (committed, folded, or recovered from its pending log by the next
opener) and not in the file, which is what the repository keeps. Each transaction that puts a
file cassette's recordings in the store notes their keys here, in the store's meta table; the
write of the file clears the note, and the next opening of the cassette finds any note left and
writes those recordings into its file (`cassette_file.sync`).
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable
from typing import Any

from pyrula.journal.keys import namespace_prefix, split_key
from pyrula.journal.store import Txn

# + a cassette's name: the keys of its recordings ahead of its file, each past the cassette's
# prefix (`_TAIL` bytes: a fingerprint and an occurrence), sorted.
_AHEAD = b"cassette-ahead\x00"
_TAIL = 32 + 4


def note(
    txn: Txn, meta_db: Any, keys: Iterable[bytes], within: Container[str] | None = None
) -> None:
    """In the transaction that puts recordings under `keys` in the store: note them, per
    cassette, as ahead of its file (only those of the cassettes `within`, if given)."""
    tails: dict[str, set[bytes]] = {}
    for key in keys:
        name = split_key(key)[0]
        if within is None or name in within:
            tails.setdefault(name, set()).add(key[len(namespace_prefix(name)) :])
    for name, found in tails.items():
        old = txn.get(_AHEAD + name.encode(), db=meta_db)
        if old is not None:
            found.update(_split(bytes(old)))
        txn.put(_AHEAD + name.encode(), b"".join(sorted(found)), db=meta_db)


def keys_ahead(txn: Txn, meta_db: Any, name: str) -> list[bytes]:
    """The keys of cassette `name` noted as ahead of its file (none, nearly always)."""
    noted = txn.get(_AHEAD + name.encode(), db=meta_db)
    prefix = namespace_prefix(name)
    return [prefix + tail for tail in _split(bytes(noted or b""))]


def clear(txn: Txn, meta_db: Any, name: str, written: Collection[bytes], exchanges_db: Any) -> None:
    """In the transaction that notes cassette `name`'s file as written from the store with the
    recordings under `written`: those are no longer ahead of it, nor is one deleted since. One
    another process committed after the file's recordings were read stays noted."""
    prefix = namespace_prefix(name)
    left = [
        key
        for key in keys_ahead(txn, meta_db, name)
        if key not in written and txn.get(key, db=exchanges_db) is not None
    ]
    if left:
        txn.put(_AHEAD + name.encode(), b"".join(key[len(prefix) :] for key in left), db=meta_db)
    else:
        txn.delete(_AHEAD + name.encode(), db=meta_db)


def _split(noted: bytes) -> list[bytes]:
    return [noted[at : at + _TAIL] for at in range(0, len(noted), _TAIL)]


__all__ = ["clear", "keys_ahead", "note"]
