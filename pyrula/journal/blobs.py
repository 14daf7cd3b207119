"""Content-addressed storage for recorded requests.

A conversation re-sends its whole history on every turn. Storing each request whole would cost
O(N²) bytes over N turns, so a request's large parts are stored once by digest, and a list
(messages, input, contents) is stored as a chain of cons cells, each naming the cell before it and
one element. Turn N+1 shares turn N's chain and adds only the cells for its new elements.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

from pyrula.errors import StoreCorrupt
from pyrula.fingerprints import canonical_json
from pyrula.journal.store import Txn

# Values whose JSON is shorter than this are cheaper inline than as a 32-byte reference.
_INLINE_MAX = 128
_EMPTY = b"\x00" * 32
_sha256 = hashlib.sha256


class EncodedRequest(NamedTuple):
    """A request document as `put_request` stores it, computed once: its reference, the
    blobs to put (digest, bytes) in order, and the document as canonical JSON (what the
    recorder scrubs and the size cap counts)."""

    ref: str
    blobs: list[tuple[bytes, bytes]]
    json: bytes


def _blob(blobs: list[tuple[bytes, bytes]], data: bytes) -> bytes:
    digest = _sha256(data).digest()
    blobs.append((digest, data))
    return digest


# Values whose canonical JSON is never longer than `_INLINE_MAX` (an int of fewer than 100
# digits): kept inline without encoding them to find out.
_SHORT_KINDS = (bool, type(None))
_SHORT_INT = 10**100


def _stored_value(blobs: list[tuple[bytes, bytes]], value: Any) -> Any:
    """What a document holds in place of `value`: the value inline, or a reference to its blob
    (a list: to its chain of cells). A tuple is a list: the recorder's documents were once
    re-parsed JSON."""
    kind = type(value)
    if (kind is list or kind is tuple) and value:
        cell = _EMPTY
        for element in value:
            cell = _blob(blobs, b"L" + cell + _blob(blobs, canonical_json(element)))
        return {"$list": cell.hex(), "$n": len(value)}
    if kind in _SHORT_KINDS or (kind is int and -_SHORT_INT < value < _SHORT_INT):
        return value
    encoded = canonical_json(value)
    if len(encoded) > _INLINE_MAX:
        return {"$blob": _blob(blobs, encoded).hex()}
    # A small object that itself looks like a reference is wrapped, never misread.
    if isinstance(value, dict) and ({"$blob", "$list", "$inline"} & value.keys()):
        return {"$inline": value}
    return value


def encode_request(doc: dict[str, Any]) -> EncodedRequest:
    """Each part of `doc` serialised and hashed once: what `put_request` stores and returns.
    The document's own canonical JSON is made in one pass of the encoder (C), which costs less
    than assembling it from its parts' encodings."""
    blobs: list[tuple[bytes, bytes]] = []
    stored = {
        section: {name: _stored_value(blobs, value) for name, value in part.items()}
        if isinstance(part, dict)
        else part
        for section, part in doc.items()
    }
    return EncodedRequest(_blob(blobs, canonical_json(stored)).hex(), blobs, canonical_json(doc))


def put_encoded(txn: Txn, db: Any, encoded: EncodedRequest) -> str:
    """Store an encoded request document's blobs (each once: an existing one stays); return its
    reference."""
    for digest, data in encoded.blobs:
        txn.put(digest, data, db=db, overwrite=False)
    return encoded.ref


def request_ref(doc: dict[str, Any]) -> str:
    """The reference `put_request` gives `doc`, computed without storing anything."""
    return encode_request(doc).ref


def put_request(txn: Txn, db: Any, doc: dict[str, Any]) -> str:
    """Store a request document (its top-level parts deduplicated); return its reference."""
    return put_encoded(txn, db, encode_request(doc))


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
