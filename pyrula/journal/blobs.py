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
    blobs to put (digest, bytes) in order, the JSON texts among them (every character of the
    document's canonical JSON but a list's brackets and commas is in one: what the recorder
    looks for secrets in), and the length of that canonical JSON (what the size cap counts),
    added up from its parts without encoding the document whole."""

    ref: str
    blobs: list[tuple[bytes, bytes]]
    texts: list[bytes]
    size: int


def _blob(blobs: list[tuple[bytes, bytes]], data: bytes) -> bytes:
    digest = _sha256(data).digest()
    blobs.append((digest, data))
    return digest


# Values whose canonical JSON is never longer than `_INLINE_MAX` (an int of fewer than 100
# digits): kept inline without encoding them to find out.
_SHORT_KINDS = (bool, type(None))
_SHORT_INT = 10**100


def _stored_value(
    blobs: list[tuple[bytes, bytes]], texts: list[bytes], value: Any
) -> tuple[Any, int | None]:
    """What a document holds in place of `value`: the value inline, or a reference to its blob
    (a list: to its chain of cells); and, for a stand-in, the length of `value` as canonical
    JSON (None when the value is kept as it is). A tuple is a list: the recorder's documents
    were once re-parsed JSON."""
    kind = type(value)
    if (kind is list or kind is tuple) and value:
        cell = _EMPTY
        length = len(value) + 1  # the brackets, and a comma between each two elements
        for element in value:
            encoded = canonical_json(element)
            texts.append(encoded)
            length += len(encoded)
            cell = _blob(blobs, b"L" + cell + _blob(blobs, encoded))
        return {"$list": cell.hex(), "$n": len(value)}, length
    if kind in _SHORT_KINDS or (kind is int and -_SHORT_INT < value < _SHORT_INT):
        return value, None
    encoded = canonical_json(value)
    if len(encoded) > _INLINE_MAX:
        texts.append(encoded)
        return {"$blob": _blob(blobs, encoded).hex()}, len(encoded)
    # A small object that itself looks like a reference is wrapped, never misread.
    if isinstance(value, dict) and ({"$blob", "$list", "$inline"} & value.keys()):
        return {"$inline": value}, len(encoded)
    return value, None


def encode_request(doc: dict[str, Any]) -> EncodedRequest:
    """Each part of `doc` serialised and hashed once: what `put_request` stores and returns.
    The document itself is never encoded whole: its length is the stored root's, each
    stand-in's own length swapped for its value's."""
    blobs: list[tuple[bytes, bytes]] = []
    texts: list[bytes] = []
    swapped = 0  # what the values' encodings add over their stand-ins' in the root
    stored: dict[str, Any] = {}
    for section, part in doc.items():
        if isinstance(part, dict):
            kept = {}
            for name, value in part.items():
                stand_in, length = _stored_value(blobs, texts, value)
                if length is not None:
                    swapped += length - len(canonical_json(stand_in))
                kept[name] = stand_in
            part = kept
        stored[section] = part
    root = canonical_json(stored)
    texts.append(root)
    return EncodedRequest(_blob(blobs, root).hex(), blobs, texts, len(root) + swapped)


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
