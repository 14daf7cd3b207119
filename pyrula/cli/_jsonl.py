"""The JSONL interchange format: one recorded exchange per line, exported and imported exactly.

A line is one JSON object with sorted keys and ASCII-only escapes:

    {"frames": [...], "key": "<hex>", "record": {...}, "request": {...}, "v": 1}

`key` is the exchange's LMDB key, `record` its header (`ExchangeRecord.to_json()`), `request` its
scrubbed request document and `frames` the reply as recorded, each `{"text": ...}` when the frame
is valid UTF-8, else `{"base64": ...}`. Importing a file and exporting again gives the same bytes.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyrula.cli._errors import BadExport
from pyrula.errors import RestoreRefused, StoreCorrupt
from pyrula.inspection.records import Loaded
from pyrula.journal.exchanges import ExchangeRecord, Exchanges, StoredExchange
from pyrula.journal.keys import CASSETTE_PREFIX, split_key
from pyrula.journal.store import Store
from pyrula.journal.text import frame_bytes, frame_json

EXPORT_FORMAT = 1
_RECORD_ID = re.compile(r"^[0-9a-f]{32}$")


def dumps(value: Any) -> str:
    """The one serialisation of an export line: sorted keys, no spaces, ASCII escapes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def export_line(exchange: Loaded) -> str:
    return dumps(
        {
            "v": EXPORT_FORMAT,
            "key": exchange.key.hex(),
            "record": exchange.record.to_json(),
            "request": exchange.request,
            "frames": [frame_json(f) for f in exchange.frames],
        }
    )


@dataclass(frozen=True, slots=True)
class Incoming:
    """One parsed, checked line of an export, ready to write."""

    line: int
    key: bytes
    record: ExchangeRecord
    request: dict[str, Any]
    frames: list[bytes]


def parse(lines: Iterable[str]) -> list[Incoming]:
    """Every exchange in an export, checked before anything is written; blank lines skipped."""
    parsed: list[Incoming] = []
    keys: set[bytes] = set()
    ids: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = _parse_line(number, line)
        except BadExport:
            raise
        except (ValueError, TypeError, KeyError, binascii.Error, StoreCorrupt) as exc:
            raise BadExport(
                f"line {number} is not a Pyrula JSONL export line ({exc}); import only files "
                "written by `pyrula journal export --format jsonl`"
            ) from exc
        if item.key in keys or item.record.id in ids:
            raise BadExport(
                f"line {number} repeats the key or record id of an earlier line; "
                "an export lists each exchange once: export it again"
            )
        keys.add(item.key)
        ids.add(item.record.id)
        parsed.append(item)
    return parsed


def _parse_line(number: int, line: str) -> Incoming:
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    version = data.get("v")
    if version != EXPORT_FORMAT:
        raise BadExport(
            f"line {number} has export format {version!r}; this Pyrula reads format "
            f"{EXPORT_FORMAT}: export it again with this version or upgrade pyrula"
        )
    if set(data) != {"v", "key", "record", "request", "frames"}:
        raise ValueError(f"unexpected fields {sorted(data)}")
    key = bytes.fromhex(data["key"])
    record = ExchangeRecord.from_json(data["record"])
    request = data["request"]
    if not isinstance(request, dict):
        raise ValueError("the request document is not an object")
    if not isinstance(data["frames"], list):
        raise ValueError("frames is not a list")
    frames = [frame_bytes(item) for item in data["frames"]]
    if not _RECORD_ID.match(record.id):
        raise ValueError(f"record id {record.id!r} is not 32 lower-case hex digits")
    if len(frames) != record.frames or sum(map(len, frames)) != record.size:
        raise ValueError(
            f"the frames ({len(frames)}, {sum(map(len, frames))} bytes) do not match the record "
            f"header ({record.frames}, {record.size} bytes)"
        )
    if key.startswith(CASSETTE_PREFIX):
        namespace, fingerprint, _ = split_key(key)
        if (namespace, fingerprint) != (record.namespace, record.fingerprint):
            raise ValueError("the key names another cassette or fingerprint than the record")
    return Incoming(number, key, record, request, frames)


@dataclass(frozen=True, slots=True)
class Imported:
    written: int
    replaced: int


def write(store: Store, incoming: list[Incoming]) -> Imported:
    """Write parsed exchanges under their own keys and ids, all in one transaction: the id,
    timestamps and elapsed time are the exported ones, so the store reads back as exported."""
    exchanges = [StoredExchange(i.key, i.record, i.request, i.frames) for i in incoming]
    try:
        replaced = Exchanges(store).restore(exchanges)
    except RestoreRefused as refused:
        raise BadExport(f"line {incoming[refused.index].line}: {refused}") from refused
    return Imported(len(incoming), replaced)
