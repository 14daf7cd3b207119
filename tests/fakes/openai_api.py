"""A stand-in OpenAI API for the drop-in's tests: answers every surface the tests call."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.provider import (
    OPENAI_LIB,
    Upstream,
    chat_completion,
    chat_sse,
    json_reply,
    logged_upstream,
    sse_reply,
)

ANSWER = '{"answer": "Pong."}'


def response_body(text: str = ANSWER) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-6-luna",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 9,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 2,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 11,
        },
    }


def response_sse(text: str = ANSWER) -> list[bytes]:
    def event(n: int, kind: str, **data: Any) -> bytes:
        body = {"type": kind, "sequence_number": n, **data}
        return f"event: {kind}\ndata: {json.dumps(body)}\n\n".encode()

    started = {**response_body(text), "status": "in_progress", "output": [], "usage": None}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress"}
    part = {"type": "output_text", "text": "", "annotations": []}
    ids = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    return [
        event(0, "response.created", response=started),
        event(1, "response.output_item.added", output_index=0, item={**item, "content": []}),
        event(2, "response.content_part.added", part=part, **ids),
        event(3, "response.output_text.delta", delta=text, logprobs=[], **ids),
        event(4, "response.output_text.done", text=text, logprobs=[], **ids),
        event(5, "response.content_part.done", part={**part, "text": text}, **ids),
        event(
            6,
            "response.output_item.done",
            output_index=0,
            item=response_body(text)["output"][0],
        ),
        event(7, "response.completed", response=response_body(text)),
    ]


_EMPTY_PAGE = {"object": "list", "data": [], "has_more": False, "first_id": None, "last_id": None}


def _reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
    path = request.url.path.removeprefix("/v1")
    body = json.loads(request.content) if request.content else {}
    if request.method == "POST" and path == "/chat/completions":
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return sse_reply(chat_sse("Pong .", usage=usage))
        return json_reply(chat_completion(ANSWER))
    if request.method == "POST" and path == "/responses":
        return sse_reply(response_sse()) if body.get("stream") else json_reply(response_body())
    if path == "/embeddings":
        return json_reply(
            {
                "object": "list",
                "model": "text-embedding-3-small",
                "data": [{"object": "embedding", "index": 0, "embedding": [0.5]}],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )
    if path == "/responses/input_tokens":
        return json_reply({"object": "response.input_tokens", "input_tokens": 3})
    if request.method == "GET" and (path.endswith("s") or path.endswith("input_items")):
        return json_reply(_EMPTY_PAGE)
    return json_reply({"id": "x", "object": "thing", "deleted": True})


def upstream(lib: Any = OPENAI_LIB) -> Upstream:
    """A stub provider; `.seen` lists each request that reached it as "METHOD /path"."""
    return logged_upstream(lib, _reply)
