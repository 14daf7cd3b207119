"""Sans-I/O framing of the AWS event-stream (`application/vnd.amazon.eventstream`) wire format.

Bedrock streams its replies (converse-stream, invoke-with-response-stream) as binary messages:

    [total length u32][headers length u32][prelude crc32][headers][payload][message crc32]

all big-endian, each CRC32 over every byte before it. A tee sees the bytes split anywhere, so this
decoder takes chunks in and hands whole, checksum-verified messages back. botocore's own decoder
(`botocore.eventstream`) does the same, but botocore is an optional extra and the journal core
must frame replies without it; the limits below are botocore's, so what it accepts, this accepts.
"""

from __future__ import annotations

import struct
from binascii import crc32
from collections.abc import Mapping
from dataclasses import dataclass

from pyrula.errors import StreamFormatError

CONTENT_TYPE = "application/vnd.amazon.eventstream"

HeaderValue = bool | int | bytes | str

_PRELUDE = struct.Struct(">III")
_PRELUDE_BYTES = _PRELUDE.size  # 12
_CRC_BYTES = 4
_MIN_MESSAGE = _PRELUDE_BYTES + _CRC_BYTES
_MAX_HEADERS = 128 * 1024
_MAX_PAYLOAD = 24 * 1024 * 1024

# Header value types, by their wire tag: (struct for fixed-size values, or None).
_BOOL_TRUE, _BOOL_FALSE, _BYTE_ARRAY, _STRING, _UUID = 0, 1, 6, 7, 9
_FIXED = {
    2: struct.Struct(">b"),
    3: struct.Struct(">h"),
    4: struct.Struct(">i"),
    5: struct.Struct(">q"),
    8: struct.Struct(">q"),  # timestamp, milliseconds since the epoch
}
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Message:
    """One decoded event-stream message."""

    headers: dict[str, HeaderValue]
    payload: bytes

    def header(self, name: str) -> str:
        """A string header's value, or "" when it is absent or not a string."""
        value = self.headers.get(name)
        return value if isinstance(value, str) else ""

    @property
    def message_type(self) -> str:
        """`event`, `exception` (a modelled service error) or `error`."""
        return self.header(":message-type")

    @property
    def event_type(self) -> str:
        return self.header(":event-type")


class EventStreamDecoder:
    """Incremental decoder over bytes split anywhere; malformed bytes raise `StreamFormatError`.

    An error is final: the stream has lost its framing, so every later `feed` raises it again.
    The well-framed messages before it are always handed out first.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._error: StreamFormatError | None = None

    @property
    def pending(self) -> int:
        """Bytes held that do not yet make a whole message."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[Message]:
        """The whole messages `chunk` completes. A bad frame after well-framed messages in the
        same chunk returns those messages first and raises on the next `feed` or `close`, so
        what a stream yields does not depend on how its bytes were chunked."""
        if self._error is not None:
            raise self._error
        self._buffer += chunk
        messages: list[Message] = []
        try:
            while True:
                message = self._next()
                if message is None:
                    return messages
                messages.append(message)
        except StreamFormatError as exc:
            self._error = exc
            if messages:
                return messages
            raise

    def close(self) -> None:
        """The stream ended: raise if it stopped inside a message."""
        if self._error is None and self._buffer:
            self._error = StreamFormatError(
                f"the event stream ended inside a message ({len(self._buffer)} bytes of it)"
            )
        if self._error is not None:
            raise self._error

    def _next(self) -> Message | None:
        buffer = self._buffer
        if len(buffer) < _PRELUDE_BYTES:
            return None
        total, headers_length, prelude_crc = _PRELUDE.unpack_from(buffer)
        # Checked before waiting for `total` bytes: a corrupt length must not make us buffer 4 GB.
        if crc32(buffer[:8]) != prelude_crc:
            raise StreamFormatError("event-stream prelude checksum mismatch")
        if headers_length > _MAX_HEADERS:
            raise StreamFormatError(f"event-stream headers of {headers_length} bytes are too long")
        payload_length = total - _MIN_MESSAGE - headers_length
        if payload_length < 0:
            raise StreamFormatError(
                f"event-stream message of {total} bytes cannot hold {headers_length} header bytes"
            )
        if payload_length > _MAX_PAYLOAD:
            raise StreamFormatError(f"event-stream payload of {payload_length} bytes is too long")
        if len(buffer) < total:
            return None
        frame = bytes(buffer[:total])
        del buffer[:total]
        (message_crc,) = _U32.unpack_from(frame, total - _CRC_BYTES)
        if crc32(frame[: total - _CRC_BYTES]) != message_crc:
            raise StreamFormatError("event-stream message checksum mismatch")
        headers_end = _PRELUDE_BYTES + headers_length
        return Message(
            _decode_headers(frame[_PRELUDE_BYTES:headers_end]),
            frame[headers_end : total - _CRC_BYTES],
        )


def _decode_headers(data: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    at = 0
    try:
        while at < len(data):
            (name_length,) = _U8.unpack_from(data, at)
            raw_name = data[at + 1 : at + 1 + name_length]
            if len(raw_name) != name_length:
                raise StreamFormatError("event-stream header name runs past its headers")
            name = raw_name.decode("utf-8")
            at += 1 + name_length
            (kind,) = _U8.unpack_from(data, at)
            at += 1
            value: HeaderValue
            if kind in (_BOOL_TRUE, _BOOL_FALSE):
                value = kind == _BOOL_TRUE
            elif kind in _FIXED:
                (value,) = _FIXED[kind].unpack_from(data, at)
                at += _FIXED[kind].size
            elif kind in (_BYTE_ARRAY, _STRING):
                (length,) = _U16.unpack_from(data, at)
                raw = data[at + 2 : at + 2 + length]
                if len(raw) != length:
                    raise StreamFormatError("event-stream header value runs past its headers")
                value = raw.decode("utf-8") if kind == _STRING else raw
                at += 2 + length
            elif kind == _UUID:
                value = data[at : at + 16]
                if len(value) != 16:
                    raise StreamFormatError("event-stream header value runs past its headers")
                at += 16
            else:
                raise StreamFormatError(f"event-stream header {name!r} has unknown type {kind}")
            if name in headers:
                raise StreamFormatError(f"event-stream header {name!r} appears twice")
            headers[name] = value
    except struct.error as exc:
        raise StreamFormatError("event-stream headers end inside a header") from exc
    except UnicodeDecodeError as exc:
        raise StreamFormatError("event-stream header is not valid UTF-8") from exc
    return headers


def decode_all(data: bytes) -> list[Message]:
    """Every message of a whole recorded stream (raises on malformed or cut-short bytes)."""
    decoder = EventStreamDecoder()
    messages = decoder.feed(data)
    decoder.close()
    return messages


def is_eventstream(data: bytes) -> bool:
    """Whether `data` starts with an event-stream prelude (its checksum is a strong tell)."""
    if len(data) < _PRELUDE_BYTES:
        return False
    prelude_crc: int = _U32.unpack_from(data, 8)[0]
    return crc32(data[:8]) == prelude_crc


def encode_message(headers: Mapping[str, HeaderValue], payload: bytes) -> bytes:
    """One message on the wire (what Bedrock sends; used by stand-in providers and tests).

    Integers are written as 32-bit when they fit, else 64-bit.
    """
    encoded = bytearray()
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        encoded += _U8.pack(len(raw_name)) + raw_name
        if isinstance(value, bool):
            encoded += _U8.pack(_BOOL_TRUE if value else _BOOL_FALSE)
        elif isinstance(value, int):
            kind = 4 if -(2**31) <= value < 2**31 else 5
            encoded += _U8.pack(kind) + _FIXED[kind].pack(value)
        elif isinstance(value, str):
            raw = value.encode("utf-8")
            encoded += _U8.pack(_STRING) + _U16.pack(len(raw)) + raw
        else:
            encoded += _U8.pack(_BYTE_ARRAY) + _U16.pack(len(value)) + value
    total = _MIN_MESSAGE + len(encoded) + len(payload)
    prelude = struct.pack(">II", total, len(encoded))
    message = prelude + _U32.pack(crc32(prelude)) + bytes(encoded) + payload
    return message + _U32.pack(crc32(message))
