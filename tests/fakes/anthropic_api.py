"""A stand-in Anthropic API (direct, Bedrock, Vertex) for the drop-in's tests."""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any

from tests.fakes.provider import (
    ANTHROPIC_LIB,
    Upstream,
    anthropic_message,
    anthropic_sse,
    json_reply,
    logged_upstream,
    sse_reply,
)

ANSWER = '{"answer": "Pong."}'
MSG: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Ping?"}],
}

_EMPTY_PAGE = {"data": [], "has_more": False, "first_id": None, "last_id": None}
_BATCH = {
    "id": "msgbatch_1",
    "type": "message_batch",
    "processing_status": "in_progress",
    "request_counts": {"processing": 1, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
    "created_at": "2026-11-30T00:00:00Z",
    "expires_at": "2026-12-01T00:00:00Z",
    "ended_at": None,
    "archived_at": None,
    "cancel_initiated_at": None,
    "results_url": None,
}


def _header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def eventstream_frame(payload: bytes, event_type: str = "chunk") -> bytes:
    """One AWS event-stream message, as Bedrock sends it (prelude, CRCs and all)."""
    headers = (
        _header(":event-type", event_type)
        + _header(":content-type", "application/json")
        + _header(":message-type", "event")
    )
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + headers + payload
    return message + struct.pack(">I", binascii.crc32(message))


def bedrock_stream(text: str, *, stop: bool = True) -> list[bytes]:
    """Anthropic's SSE events as Bedrock wraps them: base64 JSON in event-stream frames."""
    frames = []
    for sse in anthropic_sse(text, stop=stop):
        data = sse.decode().split("data: ", 1)[1].strip()
        if '"message_stop"' in data:  # Bedrock's own counts ride on the last event
            metrics = {"inputTokenCount": 5, "outputTokenCount": 3, "invocationLatency": 9}
            data = json.dumps({**json.loads(data), "amazon-bedrock-invocationMetrics": metrics})
        payload = json.dumps({"bytes": base64.b64encode(data.encode()).decode()}).encode()
        frames.append(eventstream_frame(payload))
    return frames


def _reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
    path = request.url.path.removeprefix("/v1")
    body = json.loads(request.content) if request.content else {}
    if request.method == "POST" and path == "/messages":
        if body.get("stream"):
            return sse_reply(anthropic_sse("Pong ."))
        return json_reply(anthropic_message(ANSWER))
    if path.endswith("/invoke-with-response-stream"):  # Bedrock
        return 200, {"content-type": "application/vnd.amazon.eventstream"}, bedrock_stream("Pong .")
    if path.endswith("/invoke") or path.endswith(":rawPredict"):  # Bedrock, Vertex
        return json_reply(anthropic_message(ANSWER))
    if path.endswith(":streamRawPredict"):  # Vertex
        return sse_reply(anthropic_sse("Pong ."))
    if request.method == "POST" and path == "/messages/batches":
        return json_reply(_BATCH)
    if path == "/messages/count_tokens":
        return json_reply({"input_tokens": 3})
    if request.method == "GET" and not path.rsplit("/", 1)[-1].startswith(("msg", "x")):
        return json_reply(_EMPTY_PAGE)
    return json_reply({"id": "x_1", "type": "thing"})


def upstream(lib: Any = ANTHROPIC_LIB) -> Upstream:
    """A stub provider; `.seen` lists each request that reached it as "METHOD /path"."""
    return logged_upstream(lib, _reply)
