"""Gemini's server-sent events, as the journal frames them: the SSE decoder and the Gemini
completion rule (`pyrula.replies.gemini.finished`) over arbitrary splits and corrupted bytes.

Whatever arrives, feeding it either parses or raises a typed Pyrula error; a well-formed stream
split anywhere gives the same events, and is complete exactly when its last chunk finished."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from pyrula.errors import PyrulaError
from pyrula.replies import gemini
from pyrula.transport.framing import SSEDecoder, SSEEvent, completion_for

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_FINISH = st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "CONTINUATION"])


@st.composite
def gemini_stream(draw: Any) -> tuple[bytes, list[str], bool]:
    """Gemini's wire format: `data: {...}` and a CRLF blank line, no end marker; the last chunk
    carries `finishReason` (when the stream was not cut short) and `usageMetadata`."""
    texts = draw(st.lists(_TEXT, min_size=1, max_size=6))
    finished = draw(st.booleans())
    crlf = draw(st.booleans())
    chunks = []
    for i, text in enumerate(texts):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
        if finished and i == len(texts) - 1:
            candidate["finishReason"] = draw(_FINISH)
        chunks.append({"candidates": [candidate], "modelVersion": "gemini-test"})
    chunks[-1]["usageMetadata"] = {"promptTokenCount": 3, "candidatesTokenCount": len(texts)}
    data = [json.dumps(c, ensure_ascii=draw(st.booleans())) for c in chunks]
    end = "\r\n\r\n" if crlf else "\n\n"
    return "".join(f"data: {d}{end}" for d in data).encode(), data, finished


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({min(c, len(data)) for c in cuts}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def _decode(pieces: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for piece in pieces for e in decoder.feed(piece)]
    return events + decoder.close()


def _complete(pieces: list[bytes]) -> bool:
    completion = completion_for("gemini.generate", "text/event-stream", {}, {})
    for piece in pieces:
        completion.feed(piece)
    return completion.complete or completion.at_eof()


@given(gemini_stream(), st.lists(st.integers(min_value=0, max_value=4096), max_size=16))
def test_any_split_gives_the_same_chunks_and_completion(stream, cuts):
    data, chunks, finished = stream
    pieces = _pieces(data, cuts)
    assert [e.data for e in _decode(pieces)] == chunks
    assert _complete(pieces) is finished


@given(gemini_stream(), st.integers(min_value=0, max_value=4096))
def test_a_stream_cut_before_its_last_chunk_is_not_complete(stream, cut):
    data, _, _ = stream
    last = data.rfind(b"data: ")
    cut_short = data[: min(cut, last)]
    assert _complete([cut_short]) is False


def _typed_or_parsed(pieces: list[bytes]) -> None:
    try:
        for event in _decode(pieces):
            assert isinstance(event.data, str)
            assert isinstance(gemini.finished(event), bool)
        _complete(pieces)
    except PyrulaError:
        pass  # a typed error is an allowed outcome; anything else fails the test


@given(
    gemini_stream(),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=4096), st.binary(max_size=4)), max_size=8
    ),
    st.lists(st.integers(min_value=0, max_value=4096), max_size=8),
)
def test_corrupted_bytes_parse_or_raise_a_typed_error(stream, edits, cuts):
    data = bytearray(stream[0])
    for at, replacement in edits:
        at = min(at, len(data))
        data[at : at + len(replacement)] = replacement
    _typed_or_parsed(_pieces(bytes(data), cuts))


@given(st.binary(max_size=512), st.lists(st.integers(min_value=0, max_value=512), max_size=8))
@example(b"data: " + b"[" * 100_000 + b"\r\n\r\n", [])  # deeper than json's recursion limit
@example(b'data: {"candidates": [{"finishReason": "STOP"}]}\r', [])  # a CR with no LF after it
@example(b"\xff\xfe data: \x00\r\n\r\n", [1, 2])
def test_arbitrary_bytes_parse_or_raise_a_typed_error(data, cuts):
    _typed_or_parsed(_pieces(data, cuts))


def test_only_a_chunk_whose_every_candidate_finished_ends_the_stream():
    def finished(doc: Any) -> bool:
        return gemini.finished(SSEEvent("message", json.dumps(doc)))

    assert finished({"candidates": [{"finishReason": "STOP"}]})
    assert not finished({"candidates": [{"finishReason": "STOP"}, {"content": {}}]})
    assert not finished({"candidates": []}) and not finished({"usageMetadata": {}})
    assert not finished([1, 2]) and not finished("STOP")
