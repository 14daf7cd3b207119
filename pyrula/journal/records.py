"""An exchange's record header, and the one stored value that holds it with the reply's first page.

Three record formats, told apart by the value's first byte (docs/record-format.md):

    format 3:  0xC6 | u32 CRC-32 of what follows | fixed fields | text | extra | page 0
    format 2:  0xC5 | u32 CRC-32 of what follows | u32 header length | header (JSON) | page 0
    format 1:  u32 header length | header (JSON) | page 0                     (first byte 0x00)

New records are written in format 3: the fixed-size fields first, at fixed offsets, so a replay
reads a header with one `struct` unpack, one UTF-8 decode and one split instead of parsing JSON.
A record whose text holds a NUL (format 3's separator) is written in format 2. Formats 1 and 2
still read, and a record restored from an export keeps the format it was exported in, so
exporting it again gives the same bytes.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from typing import Any, NamedTuple

from pyrula.errors import StoreCorrupt
from pyrula.journal.keys import describe_key

RECORD_FORMAT = 3
_U32 = struct.Struct(">I")
_CRC_AND_LENGTH = struct.Struct(">II")
_HEADER_DECODER = json.JSONDecoder()
# `json.dumps` with options builds an encoder per call; a record is written per recording.
_COMPACT = json.JSONEncoder(separators=(",", ":"))
_MARK_2 = 0xC5  # the first byte of a format 2 value (checksummed, JSON header)
_MARK_3 = 0xC6  # the first byte of a format 3 value (checksummed, binary header)

# Format 3's fixed fields, in this order: id (16 raw bytes), fingerprint (32), request (32),
# status (u16), flags (u8: bit 0 = streamed), frames, pages (u32), size (u64), recorded_at,
# elapsed_ms (f64), then how many headers, and the lengths in bytes of the text and of extra.
# The text is surface, method, namespace, url and each header's name and value, NUL-separated.
_FIXED = struct.Struct(">16s32s32sHBIIQddIII")
_FIXED_END = 5 + _FIXED.size  # after the marker byte and the checksum
_STREAMED = 1
_LOWER_HEX = {n: re.compile(f"[0-9a-f]{{{n}}}") for n in (32, 64)}
_new_tuple = tuple.__new__


class ExchangeRecord(NamedTuple):
    """One recorded reply and how to find the request that produced it (immutable)."""

    id: str  # 32 lower-case hex digits
    surface: str
    fingerprint: str  # 64 lower-case hex digits
    request: str  # hex digest of the scrubbed canonical request document in `blobs`
    method: str
    url: str  # scrubbed: no credentials, no secret query parameters
    status: int
    headers: list[tuple[str, str]]
    frames: int
    size: int
    pages: int
    streamed: bool
    recorded_at: float
    elapsed_ms: float
    namespace: str = ""
    format: int = RECORD_FORMAT
    extra: dict[str, Any] = {}

    def to_json(self) -> dict[str, Any]:
        data = self._asdict()
        data["headers"] = [list(pair) for pair in self.headers]
        data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExchangeRecord:
        version = data.get("format", 0)
        if version > RECORD_FORMAT:
            raise StoreCorrupt(
                f"record {data.get('id')} has format {version}, newer than this Pyrula reads "
                f"({RECORD_FORMAT}); upgrade pyrula"
            )
        data = dict(data)
        data["headers"] = [(str(k), str(v)) for k, v in data["headers"]]
        data["extra"] = dict(data.get("extra") or {})
        return cls(**data)


def encode(record: ExchangeRecord, first_page: bytes) -> bytes:
    """The stored value of `record` and its first page, in the record's own format.

    `ValueError` when a format 3 record has a field its layout cannot hold exactly
    (`fits_format_3`).
    """
    if record.format >= 3:
        return _encode_3(record, first_page)
    header = _COMPACT.encode(record.to_json()).encode()
    body = _U32.pack(len(header)) + header + first_page
    if record.format < 2:
        return body
    return bytes([_MARK_2]) + _U32.pack(zlib.crc32(body)) + body


def fits_format_3(record: ExchangeRecord, strings: list[str] | None = None) -> str | None:
    """Why format 3 cannot hold `record` exactly, or None when it can (`strings`: its text
    fields, `_strings(record)`, when the caller has them)."""
    for name, digits in (("id", 32), ("fingerprint", 64), ("request", 64)):
        value = getattr(record, name)
        if type(value) is not str or _LOWER_HEX[digits].fullmatch(value) is None:
            return f"{name} is not {digits} lower-case hex digits"
    counts = (record.status, record.frames, record.pages, len(record.headers))
    if not all(type(n) is int and 0 <= n < 1 << 32 for n in counts) or record.status > 0xFFFF:
        return "status, frames, pages or the header count is out of its field's range"
    if type(record.size) is not int or not 0 <= record.size < 1 << 64:
        return "size is out of its field's range"
    if type(record.recorded_at) is not float or type(record.elapsed_ms) is not float:
        return "recorded_at or elapsed_ms is not a float"
    if type(record.streamed) is not bool or type(record.extra) is not dict:
        return "streamed is not a bool or extra is not an object"
    if "\x00" in "".join(_strings(record) if strings is None else strings):
        return "a text field holds a NUL"
    return None


def in_newest_format(record: ExchangeRecord, strings: list[str] | None = None) -> ExchangeRecord:
    """`record` marked for the newest format that holds it exactly: 3, else 2 (`strings`: as
    `fits_format_3` takes them)."""
    format_ = RECORD_FORMAT if fits_format_3(record, strings) is None else 2
    return record if record.format == format_ else record._replace(format=format_)


def encode_newest(record: ExchangeRecord, first_page: bytes) -> tuple[ExchangeRecord, bytes]:
    """`in_newest_format(record)` and its stored value, with `record` checked against format 3
    once (the recorder's path: `encode` would check it again)."""
    strings = _strings(record)
    record = in_newest_format(record, strings)
    if record.format == RECORD_FORMAT:
        return record, _pack_3(record, first_page, strings)
    return record, encode(record, first_page)


def _strings(record: ExchangeRecord) -> list[str]:
    strings = [record.surface, record.method, record.namespace, record.url]
    for name, value in record.headers:
        strings += (name, value)
    return strings


def _encode_3(record: ExchangeRecord, first_page: bytes) -> bytes:
    why = fits_format_3(record)
    if why is not None:
        raise ValueError(f"record format 3 cannot hold this record: {why}")
    return _pack_3(record, first_page)


def _pack_3(record: ExchangeRecord, first_page: bytes, strings: list[str] | None = None) -> bytes:
    text = "\x00".join(_strings(record) if strings is None else strings).encode(
        "utf-8", "surrogatepass"
    )
    extra = _COMPACT.encode(record.extra).encode() if record.extra else b""
    if len(text) >= 1 << 32 or len(extra) >= 1 << 32:
        raise ValueError("record format 3 cannot hold this record: its text is over 4 GiB")
    fixed = _FIXED.pack(
        bytes.fromhex(record.id),
        bytes.fromhex(record.fingerprint),
        bytes.fromhex(record.request),
        record.status,
        _STREAMED if record.streamed else 0,
        record.frames,
        record.pages,
        record.size,
        record.recorded_at,
        record.elapsed_ms,
        len(record.headers),
        len(text),
        len(extra),
    )
    body = b"".join((fixed, text, extra, first_page))
    return bytes([_MARK_3]) + _U32.pack(zlib.crc32(body)) + body


def decode(value: bytes | memoryview, key: bytes | None = None) -> tuple[ExchangeRecord, bytes]:
    """The record in a stored value and its first page; `StoreCorrupt` naming `key` when the
    value is damaged, of an unknown layout, or of a newer format."""
    # The replay hot path: the error text (naming the key) is built only when something is wrong.
    data = value if type(value) is bytes else bytes(value)
    marker = data[0] if data else -1
    if marker in (_MARK_3, _MARK_2):
        if len(data) < 9:
            verified(data[1:], where(key))  # raises when the checksum is short or wrong
            raise StoreCorrupt(f"{where(key)} is truncated")
        crc, length = _CRC_AND_LENGTH.unpack_from(data, 1)
        if crc != zlib.crc32(memoryview(data)[5:]):
            verified(data[1:], where(key))  # raises, naming the record
        if marker == _MARK_3:
            return _decode_3(data, key)
        start = 9
    elif marker != 0:
        raise StoreCorrupt(f"{where(key)} is damaged (unknown layout); delete or re-record it")
    elif len(data) < 4:
        raise StoreCorrupt(f"{where(key)} is truncated")
    else:
        (length,) = _U32.unpack_from(data, 0)
        start = 4
    try:
        header = _HEADER_DECODER.decode(data[start : start + length].decode())
        record = ExchangeRecord.from_json(header)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoreCorrupt(f"{where(key)}: its header is damaged ({exc})") from exc
    if record.format != (2 if marker == _MARK_2 else 1):
        raise StoreCorrupt(f"{where(key)}: its header's format does not match its layout")
    return record, data[start + length :]


def _decode_3(data: bytes, key: bytes | None) -> tuple[ExchangeRecord, bytes]:
    try:
        (
            record_id,
            fingerprint,
            request,
            status,
            flags,
            frames,
            pages,
            size,
            recorded_at,
            elapsed_ms,
            header_count,
            text_bytes,
            extra_bytes,
        ) = _FIXED.unpack_from(data, 5)
        text_end = _FIXED_END + text_bytes
        strings = data[_FIXED_END:text_end].decode("utf-8", "surrogatepass").split("\x00")
        extra_end = text_end + extra_bytes
        extra = _HEADER_DECODER.decode(data[text_end:extra_end].decode()) if extra_bytes else {}
    except (struct.error, ValueError, RecursionError) as exc:
        raise StoreCorrupt(f"{where(key)}: its header is damaged ({exc})") from exc
    if len(strings) != 4 + 2 * header_count or extra_end > len(data) or type(extra) is not dict:
        raise StoreCorrupt(f"{where(key)}: its header is damaged (its lengths do not add up)")
    pairs = iter(strings[4:])
    # `tuple.__new__`: the fields in order, without the generated `__new__`'s argument handling.
    record = _new_tuple(
        ExchangeRecord,
        (
            record_id.hex(),
            strings[0],
            fingerprint.hex(),
            request.hex(),
            strings[1],
            strings[3],
            status,
            list(zip(pairs, pairs)),  # noqa: B905 - one iterator twice: names and values in turn
            frames,
            size,
            pages,
            bool(flags & _STREAMED),
            recorded_at,
            elapsed_ms,
            strings[2],
            3,
            extra,
        ),
    )
    return record, data[extra_end:]


def verified(data: bytes, what: str) -> bytes:
    """`data` without its leading CRC-32, which must match the rest."""
    if len(data) < 4 or _U32.unpack_from(data, 0)[0] != zlib.crc32(memoryview(data)[4:]):
        raise StoreCorrupt(
            f"{what} is damaged (its checksum does not match); export what still reads with "
            "`pyrula journal export` and delete or re-record this one"
        )
    return data[4:]


def where(key: bytes | None) -> str:
    return f"the exchange of {describe_key(key)}" if key is not None else "a recorded exchange"
