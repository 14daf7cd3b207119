"""The OpenAI API, stood in: reply builders for chat completions and responses (plain and
streamed), the surfaces the drop-in's tests call, and SDK clients sending to a stand-in."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai

from tests.fakes.provider import (
    OPENAI_LIB,
    Reply,
    Upstream,
    json_reply,
    sdk_client,
    sse_reply,
)

ANSWER = '{"answer": "Pong."}'
BASE_URL = "http://openai.test/v1"
USAGE = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
STREAM_USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
SMALL_USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
SSE_HEADERS = {"content-type": "text/event-stream"}


def chat_completion(
    text: str,
    *,
    model: str = "gpt-test",
    id: str = "chatcmpl-1",
    usage: dict[str, int] | None = USAGE,
    **extra: Any,
) -> dict[str, Any]:
    """A chat completion answering `text`; `extra` fields go beside `choices`."""
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        **extra,
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def chat_json(text: str) -> bytes:
    """A chat completion's bytes, as the proxy tests' upstream sends it."""
    return json.dumps(
        chat_completion(text, model="m", id="chatcmpl-up", usage=SMALL_USAGE)
    ).encode()


def sse(*events: dict[str, Any] | str) -> list[bytes]:
    """Frames of an OpenAI-style stream: `data: {json}` each, `[DONE]` given as a string."""
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]


def chat_chunks(
    pieces: Sequence[str],
    *,
    done: bool = True,
    finish: bool = True,
    role: bool = False,
    usage: dict[str, int] | None = None,
    id: str = "chatcmpl-up",
    model: str = "m",
) -> list[bytes]:
    """A streamed chat completion, one chunk a piece: an opening `role` chunk if asked, the
    finish chunk, a usage chunk, then `[DONE]`."""
    base = {"id": id, "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, str], finish_reason: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    events: list[dict[str, Any] | str] = []
    if role:
        events.append(chunk({"role": "assistant", "content": ""}))
    events.extend(chunk({"content": piece}) for piece in pieces)
    if finish:
        events.append(chunk({}, "stop"))
    if usage is not None:
        events.append({**base, "choices": [], "usage": usage})
    if done:
        events.append("[DONE]")
    return sse(*events)


def chat_sse(
    text: str, *, usage: bool = False, done: bool = True, finish: bool = True
) -> list[bytes]:
    """`text` streamed word by word, as the OpenAI SDK tests expect it."""
    return chat_chunks(
        [word + " " for word in text.split(" ")],
        done=done,
        finish=finish,
        role=True,
        usage=STREAM_USAGE if usage else None,
        id="chatcmpl-s",
        model="gpt-test",
    )


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


def _reply(request: Any, path: str) -> Reply:
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


def upstream(lib: Any = OPENAI_LIB, *, base_path: str = "/v1") -> Upstream:
    """A stand-in OpenAI API, or an OpenAI-compatible one serving under `base_path` (Groq's
    `/openai/v1`, OpenRouter's `/api/v1`); `.seen` lists each request that reached it as
    "METHOD /path" without the base path."""

    def reply(request: Any) -> Reply:
        return _reply(request, request.url.path.removeprefix(base_path))

    return Upstream(lib, reply, (base_path,))


def openai_client(upstream: Upstream, *, base_url: str = BASE_URL, **kw: Any) -> Any:
    """An OpenAI client sending to `upstream` (see `provider.sdk_client`)."""
    return sdk_client(upstream, openai.OpenAI, openai.AsyncOpenAI, base_url, **kw)


def function_call_response(name: str, arguments: str) -> dict[str, Any]:
    """A Responses API reply whose output is one call of the function `name`."""
    item = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }
    return {**response_body(), "output": [item]}


def chat_tool_call_sse(name: str, pieces: Sequence[str]) -> list[bytes]:
    """A streamed chat completion calling the tool `name`, its arguments in `pieces`."""
    base = {"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    opening = {"index": 0, "id": "call_1", "type": "function"}
    opening["function"] = {"name": name, "arguments": ""}
    events: list[dict[str, Any] | str] = [chunk({"role": "assistant", "tool_calls": [opening]})]
    for piece in pieces:
        events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    events += [chunk({}, "tool_calls"), "[DONE]"]
    return sse(*events)


def function_call_sse(name: str, pieces: Sequence[str]) -> list[bytes]:
    """A streamed Responses API reply calling the function `name`, its arguments in `pieces`."""

    def event(n: int, kind: str, **data: Any) -> bytes:
        body = {"type": kind, "sequence_number": n, **data}
        return f"event: {kind}\ndata: {json.dumps(body)}\n\n".encode()

    done = function_call_response(name, "".join(pieces))
    item = done["output"][0]
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    ids = {"item_id": item["id"], "output_index": 0}
    frames = [
        event(0, "response.created", response=started),
        event(1, "response.output_item.added", output_index=0, item={**item, "arguments": ""}),
    ]
    frames += [
        event(2 + n, "response.function_call_arguments.delta", delta=piece, **ids)
        for n, piece in enumerate(pieces)
    ]
    n = 2 + len(pieces)
    return [
        *frames,
        event(n, "response.function_call_arguments.done", arguments=item["arguments"], **ids),
        event(n + 1, "response.output_item.done", output_index=0, item=item),
        event(n + 2, "response.completed", response=done),
    ]
