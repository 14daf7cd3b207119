"""Content-addressed storage for recorded requests.

A conversation re-sends its whole history on every turn. Storing each request whole would cost
O(N²) bytes over N turns, so a request's large parts are stored once by digest, and a list
(messages, input, contents) is stored as a chain of cons cells, each naming the cell before it and
one element. Turn N+1 shares turn N's chain and adds only the cells for its new elements.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pyrula.errors import StoreCorrupt
from pyrula.fingerprints import canonical_json
from pyrula.journal.store import Txn

# Values whose JSON is shorter than this are cheaper inline than as a 32-byte reference.
_INLINE_MAX = 128
_EMPTY = b"\x00" * 32


def _put(txn: Txn | None, db: Any, data: bytes) -> bytes:
    digest = hashlib.sha256(data).digest()
    if txn is not None:
        txn.put(digest, data, db=db, overwrite=False)
    return digest


def _store_value(txn: Txn | None, db: Any, value: Any) -> Any:
    if isinstance(value, list) and value:
        cell = _EMPTY
        for element in value:
            element_ref = _put(txn, db, canonical_json(element))
            cell = _put(txn, db, b"L" + cell + element_ref)
        return {"$list": cell.hex(), "$n": len(value)}
    encoded = canonical_json(value)
    if len(encoded) <= _INLINE_MAX:
        # A small object that itself looks like a reference is wrapped, never misread.
        if isinstance(value, dict) and ({"$blob", "$list", "$inline"} & value.keys()):
            return {"$inline": value}
        return value
    return {"$blob": _put(txn, db, encoded).hex()}


def request_ref(doc: dict[str, Any]) -> str:
    """The reference `put_request` gives `doc`, computed without storing anything."""
    return put_request(None, None, doc)


def put_request(txn: Txn | None, db: Any, doc: dict[str, Any]) -> str:
    """Store a request document (its top-level parts deduplicated); return its reference
    (with no transaction, only the reference)."""
    stored = {
        section: {name: _store_value(txn, db, value) for name, value in doc[section].items()}
        if isinstance(doc.get(section), dict)
        else doc.get(section)
        for section in doc
    }
    return _put(txn, db, canonical_json(stored)).hex()


def _load_value(txn: Txn, db: Any, value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if "$inline" in value:
        return value["$inline"]
    if "$blob" in value:
        digest = bytes.fromhex(value["$blob"])
        return _json(_get(txn, db, digest), digest)
    if "$list" in value:
        items: list[Any] = []
        cell = bytes.fromhex(value["$list"])
        while cell != _EMPTY:
            data = _get(txn, db, cell)
            cell, element = data[1:33], data[33:65]
            items.append(_json(_get(txn, db, element), element))
        items.reverse()
        return items
    return value


def _get(txn: Txn, db: Any, digest: bytes) -> bytes:
    """The blob stored under `digest`, checked against it: its key is its SHA-256."""
    data = txn.get(digest, db=db)
    if data is None:
        raise StoreCorrupt(f"missing blob {digest.hex()[:12]}")
    data = bytes(data)
    if hashlib.sha256(data).digest() != digest:
        raise StoreCorrupt(f"damaged: blob {digest.hex()[:12]} does not match its digest")
    return data


def _json(data: bytes, digest: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError as exc:  # UnicodeDecodeError included
        raise StoreCorrupt(f"damaged: blob {digest.hex()[:12]} is not JSON ({exc})") from exc


def get_request(txn: Txn, db: Any, ref: str) -> dict[str, Any]:
    """Rebuild a request document stored by `put_request`; `StoreCorrupt` if a part is damaged."""
    digest = bytes.fromhex(ref)
    stored = _json(_get(txn, db, digest), digest)
    if not isinstance(stored, dict):
        raise StoreCorrupt(f"damaged: blob {ref[:12]} is not a request document")
    return {
        section: {name: _load_value(txn, db, value) for name, value in part.items()}
        if isinstance(part, dict)
        else part
        for section, part in stored.items()
    }


def blob_refs(txn: Txn, db: Any, ref: str) -> set[bytes]:
    """Every blob a request document reaches, itself included (for pruning)."""
    seen = {bytes.fromhex(ref)}
    stored = _json(_get(txn, db, bytes.fromhex(ref)), bytes.fromhex(ref))
    for part in stored.values():
        if not isinstance(part, dict):
            continue
        for value in part.values():
            if not isinstance(value, dict):
                continue
            if "$blob" in value:
                seen.add(bytes.fromhex(value["$blob"]))
            elif "$list" in value:
                cell = bytes.fromhex(value["$list"])
                while cell != _EMPTY and cell not in seen:
                    seen.add(cell)
                    data = _get(txn, db, cell)
                    seen.add(data[33:65])
                    cell = data[1:33]
    return seen
