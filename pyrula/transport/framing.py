"""Sans-I/O framing of live replies: when has a provider finished answering?

A recorder feeds the decoded reply bytes in as they arrive and asks `complete`. Each provider ends
a streamed answer its own way (SDK-FACTS.md): its rule is in `pyrula.replies`; this module only
frames the bytes into events for it. A plain body is complete at its end.
"""

from __future__ import annotations

import importlib
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pyrula.errors import StreamFormatError
from pyrula.replies import bedrock_converse, rules_for
from pyrula.transport import eventstream


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str


class SSEDecoder:
    """Incremental server-sent-events parser over bytes split anywhere.

    httpx2 and httpx-sse parse SSE only from a live response object; a tee needs to push bytes in,
    so this is the small sans-I/O core of the same format (WHATWG event-stream).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes at the buffer's start known to hold no line end
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events `chunk` completes. Linear in the bytes fed, however they are split: a
        long line arriving in small chunks is searched once, not again with every chunk."""
        buffer = self._buffer
        buffer += chunk
        events: list[SSEEvent] = []
        start = 0
        while True:
            cut = _line_end(buffer, max(start, self._scanned))
            if cut is None:
                break
            end, width = cut
            line = bytes(buffer[start:end]).decode("utf-8", "replace")
            start = end + width
            event = self._line(line)
            if event is not None:
                events.append(event)
        del buffer[:start]
        # A trailing \r may be half of \r\n: look at it again with the next chunk.
        self._scanned = max(0, len(buffer) - 1)
        return events

    def close(self) -> list[SSEEvent]:
        """Flush at end of stream: a final event with no blank line after it still counts."""
        events = self.feed(b"\n") if self._buffer else []
        if self._data or self._event:
            event = self._line("")
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None


_LINE_END = re.compile(rb"[\r\n]")


def _line_end(buffer: bytearray, start: int = 0) -> tuple[int, int] | None:
    """Where the first line end at or after `start` is, and how wide it is (\\r\\n, \\n or
    \\r); None when there is none yet."""
    found = _LINE_END.search(buffer, start)
    if found is None:
        return None
    at = found.start()
    if buffer[at] == 0x0A:
        return at, 1
    if at + 1 < len(buffer):
        return at, 2 if buffer[at + 1] == 0x0A else 1
    # A trailing \r may be the first half of \r\n: wait for the next byte.
    return None


class Completion(Protocol):
    """Decides, from the decoded reply bytes, whether the provider has finished."""

    def feed(self, chunk: bytes) -> None: ...

    @property
    def complete(self) -> bool: ...

    def at_eof(self) -> bool:
        """Whether the reply counts as complete once the connection ends."""
        ...


class BodyCompletion:
    """A plain body (or a stream with no terminal marker) is complete when it ends."""

    complete = False

    def feed(self, chunk: bytes) -> None:
        return None

    def at_eof(self) -> bool:
        return True


class SSECompletion:
    """A server-sent-event stream, complete once `is_terminal` accepts an event."""

    def __init__(self, is_terminal: Callable[[SSEEvent], bool], *, eof_ends: bool = False) -> None:
        self._decoder = SSEDecoder()
        self._is_terminal = is_terminal
        self._eof_ends = eof_ends
        self.complete = False

    def feed(self, chunk: bytes) -> None:
        if self.complete:
            return
        for event in self._decoder.feed(chunk):
            if self._is_terminal(event):
                self.complete = True
                return

    def at_eof(self) -> bool:
        if not self.complete:
            for event in self._decoder.close():
                if self._is_terminal(event):
                    self.complete = True
        return self.complete or self._eof_ends


class EventStreamCompletion:
    """An AWS event-stream, complete once `is_terminal` accepts a message.

    Bytes that break the framing leave it incomplete for good: the reply is then journaled as
    cut short, and the SDK reading the same bytes raises its own checksum error.
    """

    def __init__(
        self, is_terminal: Callable[[eventstream.Message], bool], *, eof_ends: bool = False
    ) -> None:
        self._decoder = eventstream.EventStreamDecoder()
        self._is_terminal = is_terminal
        self._eof_ends = eof_ends
        self._broken = False
        self.complete = False

    def feed(self, chunk: bytes) -> None:
        if self.complete or self._broken:
            return
        try:
            messages = self._decoder.feed(chunk)
        except StreamFormatError:
            self._broken = True
            return
        if any(self._is_terminal(message) for message in messages):
            self.complete = True

    def at_eof(self) -> bool:
        return self.complete or (self._eof_ends and not self._broken)


def is_streamed(content_type: str) -> bool:
    """Whether a reply with this content type is a stream of events (SSE or AWS event-stream)."""
    return "event-stream" in content_type or eventstream.CONTENT_TYPE in content_type


def eventstream_documents(body: bytes) -> list[Any]:
    """The JSON each event of a recorded AWS event-stream carries (a Bedrock chunk unwrapped),
    as far as the bytes are well framed."""
    decoder = eventstream.EventStreamDecoder()
    try:
        messages = decoder.feed(body)
    except StreamFormatError:
        return []
    return [bedrock_converse.document(m) for m in messages if m.message_type == "event"]


def reply_documents(body: bytes, streamed: bool) -> list[Any]:
    """The JSON documents a recorded reply carries: a plain body's one, or one per event of a
    stream (SSE, or Bedrock's AWS event-stream), skipping what is not JSON."""
    if streamed and eventstream.is_eventstream(body):
        return eventstream_documents(body)
    if not streamed:
        try:
            return [json.loads(body)]
        except (ValueError, RecursionError):
            return []
    decoder = SSEDecoder()
    found = []
    for event in [*decoder.feed(body), *decoder.close()]:
        try:
            found.append(json.loads(event.data))
        except (ValueError, RecursionError):
            continue
    return found


def completion_for(
    surface: str, content_type: str, compared: dict[str, Any], meta: dict[str, Any]
) -> Completion:
    """The completion rule for a reply to a request on `surface` with this content type: the
    end rule of the surface's reply rules (`pyrula.replies`) for the stream's kind."""
    rules = rules_for(surface)
    if eventstream.CONTENT_TYPE in content_type:
        if rules.eventstream_end is None:
            return EventStreamCompletion(lambda m: False, eof_ends=True)
        return EventStreamCompletion(rules.eventstream_end(compared, meta))
    if "text/event-stream" not in content_type:
        return BodyCompletion()
    if rules.sse_end is None:
        return SSECompletion(lambda e: False, eof_ends=True)
    return SSECompletion(rules.sse_end(compared, meta))


class Decoder(Protocol):
    def decode(self, chunk: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Identity:
    def decode(self, chunk: bytes) -> bytes:
        return chunk

    def flush(self) -> bytes:
        return b""


class _Zlib:
    def __init__(self, wbits: int) -> None:
        self._z = zlib.decompressobj(wbits)

    def decode(self, chunk: bytes) -> bytes:
        return self._z.decompress(chunk)

    def flush(self) -> bytes:
        return self._z.flush()


class _Brotli:
    """brotli, through whichever module the HTTP stack itself would use (`brotli` or
    `brotlicffi`): httpx advertises `br` exactly when one of them is installed."""

    def __init__(self, module: Any) -> None:
        self._d = module.Decompressor()
        # brotli has `process`, brotlicffi `decompress`.
        self._step = getattr(self._d, "process", None) or self._d.decompress

    def decode(self, chunk: bytes) -> bytes:
        return bytes(self._step(chunk)) if chunk else b""

    def flush(self) -> bytes:
        return b""


class _Zstd:
    """zstd through `zstandard`, which httpx uses (and advertises `zstd` for) when installed."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self._d = module.ZstdDecompressor().decompressobj()

    def decode(self, chunk: bytes) -> bytes:
        out = bytearray()
        while chunk:
            out += self._d.decompress(chunk)
            chunk = self._d.unused_data  # a body may hold several frames
            if chunk:
                self._d = self._module.ZstdDecompressor().decompressobj()
        return bytes(out)

    def flush(self) -> bytes:
        return b""


def _module(*names: str) -> Any:
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def decoder_for(content_encoding: str) -> Decoder | None:
    """A decoder for the reply's content-encoding, or None when we cannot decode it.

    Every coding the HTTP stack can decode is decoded here too (gzip, deflate; br and zstd when
    the modules httpx uses for them are installed, which is when httpx asks for them), so a
    reply is recorded decoded, scrubbed, and replays where no decoder is installed."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return _Identity()
    if encoding in ("gzip", "x-gzip"):
        return _Zlib(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return _Zlib(32 + zlib.MAX_WBITS)
    if encoding == "br":
        brotli = _module("brotli", "brotlicffi")
        return _Brotli(brotli) if brotli is not None else None
    if encoding == "zstd":
        zstandard = _module("zstandard")
        return _Zstd(zstandard) if zstandard is not None else None
    return None
