"""The sans-I/O SSE framing: any split of the bytes gives the same events; garbage never crashes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrula.transport.framing import SSECompletion, SSEDecoder, completion_for

EVENTS = (
    b'event: message_start\ndata: {"type": "message_start"}\n\n'
    b": a comment\r\n"
    b"data: line one\r\ndata: line two\r\n\r\n"
    b"event: message_stop\ndata: {}\n\n"
)


def _decode_in_pieces(data: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    decoder = SSEDecoder()
    events = []
    start = 0
    for cut in sorted(set(cuts)):
        events += decoder.feed(data[start:cut])
        start = cut
    events += decoder.feed(data[start:])
    events += decoder.close()
    return [(e.event, e.data) for e in events]


def test_whole_stream_decodes_to_its_events():
    assert _decode_in_pieces(EVENTS, []) == [
        ("message_start", '{"type": "message_start"}'),
        ("message", "line one\nline two"),
        ("message_stop", "{}"),
    ]


@given(st.lists(st.integers(min_value=0, max_value=len(EVENTS)), max_size=12))
def test_any_split_gives_the_same_events(cuts):
    assert _decode_in_pieces(EVENTS, cuts) == _decode_in_pieces(EVENTS, [])


@settings(max_examples=300)
@given(st.binary(max_size=400), st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_arbitrary_bytes_never_raise(data, cuts):
    _decode_in_pieces(data, [c for c in cuts if c <= len(data)])
    for surface in ("openai.chat", "openai.responses", "anthropic.messages", "gemini.generate"):
        completion = completion_for(surface, "text/event-stream", {}, {})
        completion.feed(data)
        completion.at_eof()


def test_anthropic_stream_completes_at_message_stop_not_before():
    completion = completion_for("anthropic.messages", "text/event-stream", {}, {})
    assert isinstance(completion, SSECompletion)
    completion.feed(b'event: message_delta\ndata: {"type": "message_delta"}\n\n')
    assert not completion.complete
    completion.feed(b'event: message_stop\ndata: {"type": "message_stop"}\n')
    assert not completion.complete  # the event is not finished until its blank line
    completion.feed(b"\n")
    assert completion.complete


def test_openai_chat_with_two_choices_waits_for_both():
    completion = completion_for("openai.chat", "text/event-stream", {"n": 2}, {})
    completion.feed(b'data: {"choices": [{"index": 0, "finish_reason": "stop"}]}\n\n')
    assert not completion.complete
    completion.feed(b'data: {"choices": [{"index": 1, "finish_reason": "length"}]}\n\n')
    assert completion.complete


def test_gemini_stream_is_whole_only_if_its_last_chunk_finished():
    cut = completion_for("gemini.generate", "text/event-stream", {}, {})
    cut.feed(b'data: {"candidates": [{"content": {}}]}\r\n\r\n')
    assert not cut.at_eof()
    whole = completion_for("gemini.generate", "text/event-stream", {}, {})
    whole.feed(b'data: {"candidates": [{"finishReason": "STOP"}]}\r\n\r\n')
    assert whole.at_eof()


class _CountingSearch:
    """Stands in for the decoder's line-end pattern, counting the bytes each search looks at."""

    def __init__(self, pattern):
        self.pattern = pattern
        self.looked_at = 0

    def search(self, buffer, start=0):
        found = self.pattern.search(buffer, start)
        self.looked_at += (found.end() if found else len(buffer)) - start
        return found


def test_a_long_data_line_in_small_chunks_is_searched_once_not_per_chunk(monkeypatch):
    from pyrula.transport import framing

    counting = _CountingSearch(framing._LINE_END)
    monkeypatch.setattr(framing, "_LINE_END", counting)
    line = b"data: " + b"x" * (4 << 20) + b"\n\ndata: [DONE]\n\n"
    decoder = SSEDecoder()
    events = []
    for at in range(0, len(line), 1024):
        events += decoder.feed(line[at : at + 1024])
    assert [len(e.data) for e in events] == [4 << 20, 6]
    # Linear: each byte is looked at about once (a rescanned trailing byte per chunk aside).
    assert counting.looked_at <= len(line) + 2 * (len(line) // 1024 + 1)
