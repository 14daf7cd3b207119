"""The AWS event-stream decoder and the completion rules built on it: whole messages out of bytes
split anywhere, checksums enforced, every malformed input a `StreamFormatError`."""

from __future__ import annotations

import base64
import contextlib
import json
import struct
from binascii import crc32
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyrula.fingerprints import RequestParts, canonicalize

from pyrula.errors import PyrulaError, StreamFormatError
from pyrula.transport.core import Callbacks, Recording
from pyrula.transport.eventstream import (
    CONTENT_TYPE,
    EventStreamDecoder,
    Message,
    decode_all,
    encode_message,
    is_eventstream,
)
from pyrula.transport.framing import completion_for, is_streamed

header_names = st.text(min_size=1, max_size=20).filter(lambda s: len(s.encode()) < 256)
header_values = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=40),
    st.binary(max_size=40),
)
messages = st.builds(
    Message,
    headers=st.dictionaries(header_names, header_values, max_size=5),
    payload=st.binary(max_size=300),
)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def feed_all(chunks: list[bytes]) -> list[Message]:
    decoder = EventStreamDecoder()
    out = [m for chunk in chunks for m in decoder.feed(chunk)]
    decoder.close()
    return out


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, max_size=6), st.lists(st.integers(min_value=0), max_size=12))
def test_messages_split_anywhere_decode_to_what_was_encoded(sent, cuts):
    wire = b"".join(encode_message(m.headers, m.payload) for m in sent)
    assert feed_all(split(wire, cuts)) == sent


@settings(max_examples=200)
@given(st.lists(messages, min_size=1, max_size=4))
def test_botocore_reads_the_same_messages(sent):
    eventstream = pytest.importorskip("botocore.eventstream")
    wire = b"".join(encode_message(m.headers, m.payload) for m in sent)
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(wire)
    theirs = [(dict(m.headers), m.payload) for m in buffer]
    assert theirs == [(m.headers, m.payload) for m in decode_all(wire)]


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(messages, min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4),
    st.lists(st.integers(min_value=0), max_size=6),
)
def test_corrupted_bytes_parse_or_raise_a_typed_error(sent, flips, cuts):
    wire = bytearray(b"".join(encode_message(m.headers, m.payload) for m in sent))
    for at, value in flips:
        wire[at % len(wire)] = value
    try:
        feed_all(split(bytes(wire), cuts))
    except PyrulaError as exc:
        assert isinstance(exc, StreamFormatError)


@settings(max_examples=500)
@given(st.binary(max_size=200), st.lists(st.integers(min_value=0), max_size=6))
def test_arbitrary_bytes_parse_or_raise_a_typed_error(data, cuts):
    with contextlib.suppress(StreamFormatError):  # anything else fails the test
        feed_all(split(data, cuts))


def _prelude(total: int, headers: int) -> bytes:
    head = struct.pack(">II", total, headers)
    return head + struct.pack(">I", crc32(head))


def _framed(headers: bytes, payload: bytes = b"") -> bytes:
    body = _prelude(16 + len(headers) + len(payload), len(headers)) + headers + payload
    return body + struct.pack(">I", crc32(body))


@pytest.mark.parametrize(
    ("wire", "match"),
    [
        pytest.param(_prelude(16, 0)[:8] + b"\0\0\0\0", "prelude checksum", id="prelude-crc"),
        pytest.param(_prelude(16, 0) + b"\0\0\0\0", "message checksum", id="message-crc"),
        pytest.param(_prelude(20, 200_000), "too long", id="headers-too-long"),
        pytest.param(_prelude(20, 8), "cannot hold", id="headers-past-message"),
        pytest.param(_prelude(2**32 - 1, 0), "too long", id="payload-too-long"),
        pytest.param(_framed(b"\x01a\x0f"), "unknown type", id="unknown-header-type"),
        pytest.param(_framed(b"\x01a\x00\x01a\x01"), "twice", id="duplicate-header"),
        pytest.param(_framed(b"\x01a\x07\x00\x09abc"), "past its headers", id="value-past-end"),
        pytest.param(_framed(b"\x05ab"), "past its headers", id="name-past-end"),
        pytest.param(_framed(b"\x01a\x04\x00"), "inside a header", id="int-past-end"),
        pytest.param(_framed(b"\x01\xff\x00"), "UTF-8", id="name-not-utf8"),
    ],
)
def test_each_malformation_is_named(wire, match):
    decoder = EventStreamDecoder()
    with pytest.raises(StreamFormatError, match=match):
        decoder.feed(wire)
    with pytest.raises(StreamFormatError, match=match):  # the stream stays broken
        decoder.feed(b"")


def test_a_corrupt_length_fails_at_once_instead_of_waiting_for_gigabytes():
    wire = bytearray(_prelude(16, 0))
    wire[0] = 0x7F  # total length now ~2 GB, prelude checksum no longer matches
    with pytest.raises(StreamFormatError, match="prelude checksum"):
        EventStreamDecoder().feed(bytes(wire))


def test_a_stream_ending_inside_a_message_is_an_error_at_close():
    wire = encode_message({":event-type": "metadata"}, b"{}")
    decoder = EventStreamDecoder()
    assert decoder.feed(wire[:-3]) == []
    assert decoder.pending == len(wire) - 3
    with pytest.raises(StreamFormatError, match="inside a message"):
        decoder.close()


def test_header_types_decode_to_python_values():
    headers = {"t": True, "f": False, "i": 7, "l": 2**40, "s": "ü", "b": b"\x00\x01"}
    [message] = decode_all(encode_message(headers, b"x"))
    assert message.headers == headers
    # The fixed-width types botocore also sends: byte, short, timestamp, uuid.
    raw = b"\x01a\x02\xff" + b"\x01b\x03\x01\x00" + b"\x01c\x08" + struct.pack(">q", 5)
    raw += b"\x01d\x09" + bytes(range(16))
    [message] = decode_all(_framed(raw))
    assert message.headers == {"a": -1, "b": 256, "c": 5, "d": bytes(range(16))}


def test_is_eventstream_tells_the_binary_format_from_sse():
    assert is_eventstream(encode_message({}, b""))
    assert not is_eventstream(b'data: {"usage": {}}\n\n')
    assert not is_eventstream(b"")


# -- completion rules -------------------------------------------------------------------------


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, json.dumps(payload).encode())


def _chunk(payload: dict[str, Any]) -> bytes:
    return _event("chunk", {"bytes": base64.b64encode(json.dumps(payload).encode()).decode()})


_EXCEPTION = encode_message(
    {":exception-type": "throttlingException", ":message-type": "exception"}, b'{"message":"x"}'
)
CONVERSE = [
    _event("messageStart", {"role": "assistant"}),
    _event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
    _event("contentBlockStop", {"contentBlockIndex": 0}),
    _event("messageStop", {"stopReason": "end_turn"}),
    _event("metadata", {"usage": {"inputTokens": 3, "outputTokens": 1}, "metrics": {}}),
]
ANTHROPIC = [
    _chunk({"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
    _chunk({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}}),
    _chunk({"type": "message_delta", "usage": {"output_tokens": 1}}),
    _chunk({"type": "message_stop", "amazon-bedrock-invocationMetrics": {"inputTokenCount": 3}}),
]


def _complete_after(surface: str, frames: list[bytes]) -> list[bool]:
    completion = completion_for(surface, CONTENT_TYPE, {}, {})
    states = []
    for frame in frames:
        completion.feed(frame)
        states.append(completion.complete)
    return states


def test_converse_stream_is_whole_after_metadata_not_message_stop():
    assert _complete_after("bedrock.converse", CONVERSE) == [False] * 4 + [True]


def test_anthropic_on_bedrock_is_whole_at_its_message_stop_chunk():
    assert _complete_after("anthropic.messages", ANTHROPIC) == [False] * 3 + [True]


@pytest.mark.parametrize("surface", ["bedrock.converse", "anthropic.messages"])
def test_an_exception_event_ends_the_stream(surface):
    assert _complete_after(surface, [CONVERSE[0], _EXCEPTION]) == [False, True]


def test_rules_hold_over_bytes_split_anywhere():
    wire = b"".join(CONVERSE)
    completion = completion_for("bedrock.converse", CONTENT_TYPE, {}, {})
    for i in range(0, len(wire), 7):
        completion.feed(wire[i : i + 7])
        assert completion.complete == (i + 7 >= len(wire))


def test_corrupt_bytes_never_complete_and_never_raise():
    completion = completion_for("bedrock.converse", CONTENT_TYPE, {}, {})
    completion.feed(b"\x00" * 8 + b"\xff" * 8)
    completion.feed(CONVERSE[-1])
    assert not completion.complete and not completion.at_eof()


def test_an_unknown_surfaces_event_stream_is_whole_at_its_end():
    completion = completion_for("generic", CONTENT_TYPE, {}, {})
    completion.feed(CONVERSE[0])
    assert not completion.complete and completion.at_eof()


def test_an_aws_event_stream_reply_is_recorded_as_streamed():
    assert is_streamed(CONTENT_TYPE) and is_streamed("text/event-stream")
    assert not is_streamed("application/json")
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}).encode()
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream"
    canonical = canonicalize(RequestParts("POST", url, {}, body))
    replies = []
    recording = Recording(
        canonical, 200, [("content-type", CONTENT_TYPE)], Callbacks(replies.append), started=0.0
    )
    for frame in CONVERSE:
        recording.feed(frame)
    assert len(replies) == 1 and replies[0].streamed
    assert b"".join(replies[0].frames) == b"".join(CONVERSE)


def test_well_framed_messages_before_a_bad_frame_in_one_chunk_are_kept():
    good = [encode_message({":message-type": "event"}, f"m{n}".encode()) for n in range(3)]
    decoder = EventStreamDecoder()
    got = decoder.feed(b"".join(good) + b"\x00" * 8 + b"\xff" * 8)
    assert [m.payload for m in got] == [b"m0", b"m1", b"m2"]
    with pytest.raises(StreamFormatError, match="prelude checksum"):
        decoder.feed(b"")  # the stream stays broken after its good prefix
    with pytest.raises(StreamFormatError):
        decoder.close()


def test_completion_does_not_depend_on_how_the_bytes_before_a_bad_frame_were_chunked():
    wire = b"".join(CONVERSE) + b"\x00" * 8 + b"\xff" * 8
    whole = completion_for("bedrock.converse", CONTENT_TYPE, {}, {})
    whole.feed(wire)
    split = completion_for("bedrock.converse", CONTENT_TYPE, {}, {})
    for frame in [*CONVERSE, b"\x00" * 8 + b"\xff" * 8]:
        split.feed(frame)
    assert whole.complete and split.complete
