"""Where an exchange lives in the `exchanges` database: the two key layouts.

LMDB sorts keys by their bytes, so each layout starts with a prefix that keeps its records
together, and a prefix of a key selects a contiguous range:

    cassette   "c" 0x00 | cassette name | 0x00 | fingerprint (32 bytes) | occurrence (u32)
    run        "r" 0x00 | run id | 0x00 | replay scope | 0x00 | call index (u32)

A cassette's recording is found by content (its request's fingerprint, and how many identical
requests came before it); a run's by position (the n-th model call of a replay scope), checked
against the fingerprint kept in its record.
"""

from __future__ import annotations

import struct

_U32 = struct.Struct(">I")
_FINGERPRINT_BYTES = 32

CASSETTE_PREFIX = b"c\x00"
RUN_PREFIX = b"r\x00"


def namespace_prefix(name: str) -> bytes:
    """The prefix of every key of the cassette `name` (and of no other cassette)."""
    return CASSETTE_PREFIX + name.encode() + b"\x00"


def cassette_key(name: str, fingerprint: str, occurrence: int) -> bytes:
    """The key of the `occurrence`-th request with `fingerprint` (hex) in the cassette `name`."""
    return namespace_prefix(name) + bytes.fromhex(fingerprint) + _U32.pack(occurrence)


def split_key(key: bytes) -> tuple[str, str, int]:
    """(namespace, fingerprint, occurrence) of a cassette key."""
    body = key[len(CASSETTE_PREFIX) :]
    name = body[: -(_FINGERPRINT_BYTES + 4 + 1)].decode()
    fingerprint = body[-(_FINGERPRINT_BYTES + 4) : -4].hex()
    (occurrence,) = _U32.unpack(body[-4:])
    return name, fingerprint, occurrence


def run_prefix(run_id: str) -> bytes:
    """The prefix of every key of the run `run_id` (and of no other run)."""
    return RUN_PREFIX + run_id.encode() + b"\x00"


def run_key(run_id: str, scope: str, index: int) -> bytes:
    """The key of the `index`-th model call in the replay `scope` of the run `run_id`."""
    return run_prefix(run_id) + scope.encode() + b"\x00" + _U32.pack(index)


def run_of(key: bytes) -> str | None:
    """The run id of a run key (the run that made the model call), or None."""
    if not key.startswith(RUN_PREFIX):
        return None
    run_id, separator, _rest = key[len(RUN_PREFIX) :].partition(b"\x00")
    try:
        return run_id.decode() if separator else None
    except UnicodeDecodeError:
        return None


def describe_key(key: bytes) -> str:
    """A key as a person reads it: `cassette NAME, request FP12…, occurrence N`, `run ID, scope
    S, call N`, or its hex when it fits neither layout."""
    try:
        if key.startswith(CASSETTE_PREFIX):
            name, fingerprint, occurrence = split_key(key)
            return f"cassette {name!r}, request {fingerprint[:12]}, occurrence {occurrence}"
        if key.startswith(RUN_PREFIX):
            run_id, scope = key[len(RUN_PREFIX) : -5].decode().split("\x00", 1)
            (index,) = _U32.unpack(key[-4:])
            return f"run {run_id!r}, scope {scope!r}, call {index}"
    except (ValueError, UnicodeDecodeError, struct.error):
        pass
    return f"key {key.hex()}"
