"""The Anthropic API, stood in (direct, Bedrock, Vertex): reply builders for messages, plain
and streamed, the surfaces the drop-in's tests call, and SDK clients sending to a stand-in."""

from __future__ import annotations

import json
from typing import Any

import anthropic

from tests.fakes.bedrock_api import CONTENT_TYPE, anthropic_chunk
from tests.fakes.provider import (
    ANTHROPIC_LIB,
    Reply,
    Upstream,
    json_reply,
    sdk_client,
    sse_reply,
)

BASE_URL = "http://anthropic.test"
ANSWER = '{"answer": "Pong."}'
MSG: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Ping?"}],
}


def anthropic_message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }


def anthropic_sse(text: str, *, stop: bool = True) -> list[bytes]:
    """`text` streamed word by word: Anthropic's named SSE events."""

    def named(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    message = {**anthropic_message(""), "content": [], "stop_reason": None}
    frames = [
        named("message_start", {"message": message}),
        named("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    for word in text.split(" "):
        delta = {"index": 0, "delta": {"type": "text_delta", "text": word + " "}}
        frames.append(named("content_block_delta", delta))
    frames.append(named("content_block_stop", {"index": 0}))
    stopped = {"stop_reason": "end_turn", "stop_sequence": None}
    frames.append(named("message_delta", {"delta": stopped, "usage": {"output_tokens": 3}}))
    if stop:
        frames.append(named("message_stop", {}))
    return frames


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


def bedrock_stream(text: str, *, stop: bool = True) -> list[bytes]:
    """Anthropic's SSE events as Bedrock wraps them: base64 JSON in event-stream frames."""
    frames = []
    for sse in anthropic_sse(text, stop=stop):
        data = json.loads(sse.decode().split("data: ", 1)[1])
        if data["type"] == "message_stop":  # Bedrock's own counts ride on the last event
            metrics = {"inputTokenCount": 5, "outputTokenCount": 3, "invocationLatency": 9}
            data["amazon-bedrock-invocationMetrics"] = metrics
        frames.append(anthropic_chunk(data))
    return frames


def _reply(request: Any) -> Reply:
    path = request.url.path.removeprefix("/v1")
    body = json.loads(request.content) if request.content else {}
    if request.method == "POST" and path == "/messages":
        if body.get("stream"):
            return sse_reply(anthropic_sse("Pong ."))
        return json_reply(anthropic_message(ANSWER))
    if path.endswith("/invoke-with-response-stream"):  # Bedrock
        return 200, {"content-type": CONTENT_TYPE}, bedrock_stream("Pong .")
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
    return Upstream(lib, _reply)


def anthropic_client(upstream: Upstream, **kw: Any) -> Any:
    """An Anthropic client sending to `upstream` (see `provider.sdk_client`)."""
    return sdk_client(upstream, anthropic.Anthropic, anthropic.AsyncAnthropic, BASE_URL, **kw)
