"""Stand-in upstreams for tests: real SDK clients on top, a MockTransport of the SDK's own stack
underneath, and a log of every request that reached the "provider"."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import httpx2
import openai

import pyrula

OPENAI_LIB: Any = httpx2 if int(openai.__version__.split(".")[0]) >= 3 else httpx
ANTHROPIC_LIB: Any = httpx2 if int(anthropic.__version__.split(".")[0]) >= 2 else httpx

TEST_KEY = "sk-test-planted-secret-0123456789abcdef"


def journal_transport(lib: Any, inner: Any, *, is_async: bool = False, **kw: Any) -> Any:
    if lib is httpx2:
        cls = pyrula.AsyncHttpx2Transport if is_async else pyrula.Httpx2Transport
    else:
        cls = pyrula.AsyncHttpxTransport if is_async else pyrula.HttpxTransport
    return cls(inner, **kw)


def chat_completion(
    text: str, *, model: str = "gpt-test", id: str = "chatcmpl-1"
) -> dict[str, Any]:
    return {
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }


def chat_sse(
    text: str, *, usage: bool = False, done: bool = True, finish: bool = True
) -> list[bytes]:
    chunks = []
    base = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-test",
    }
    chunks.append(
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    )
    for word in text.split(" "):
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": word + " "}}]})
    if finish:
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage:
        chunks.append(
            {
                **base,
                "choices": [],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }
        )
    frames = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    if done:
        frames.append(b"data: [DONE]\n\n")
    return frames


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
    def ev(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    message = {**anthropic_message(""), "content": [], "stop_reason": None}
    frames = [
        ev("message_start", {"message": message}),
        ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
    ]
    for word in text.split(" "):
        frames.append(
            ev(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": word + " "}},
            )
        )
    frames.append(ev("content_block_stop", {"index": 0}))
    frames.append(
        ev(
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        )
    )
    if stop:
        frames.append(ev("message_stop", {}))
    return frames


@dataclass
class Upstream:
    """A scripted provider: `reply(request) -> (status, headers, frames)`; logs every request."""

    lib: Any
    reply: Callable[[Any], tuple[int, dict[str, str], list[bytes]]]
    calls: list[dict[str, Any]] = field(default_factory=list)
    headers_seen: list[dict[str, str]] = field(default_factory=list)

    def handler(self, request: Any) -> Any:
        body = json.loads(request.content) if request.content else None
        self.calls.append(body)
        self.headers_seen.append(dict(request.headers))
        status, headers, frames = self.reply(request)
        lib = self.lib

        class Frames(lib.SyncByteStream, lib.AsyncByteStream):  # type: ignore[misc,name-defined]
            def __iter__(self) -> Iterator[bytes]:
                yield from frames

            async def __aiter__(self):  # type: ignore[no-untyped-def]
                for frame in frames:
                    yield frame

        return lib.Response(status, headers=headers, stream=Frames())

    def transport(self) -> Any:
        return self.lib.MockTransport(self.handler)


def json_reply(
    payload: dict[str, Any], status: int = 200
) -> tuple[int, dict[str, str], list[bytes]]:
    return status, {"content-type": "application/json"}, [json.dumps(payload).encode()]


def sse_reply(frames: list[bytes]) -> tuple[int, dict[str, str], list[bytes]]:
    return 200, {"content-type": "text/event-stream"}, frames


def openai_client(upstream: Upstream, *, is_async: bool = False, **kw: Any) -> Any:
    lib = upstream.lib
    transport = journal_transport(lib, upstream.transport(), is_async=is_async, **kw)
    http = (lib.AsyncClient if is_async else lib.Client)(transport=transport)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key=TEST_KEY, base_url="http://openai.test/v1", http_client=http, max_retries=2)


def anthropic_client(upstream: Upstream, *, is_async: bool = False, **kw: Any) -> Any:
    lib = upstream.lib
    transport = journal_transport(lib, upstream.transport(), is_async=is_async, **kw)
    http = (lib.AsyncClient if is_async else lib.Client)(transport=transport)
    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    return cls(api_key=TEST_KEY, base_url="http://anthropic.test", http_client=http, max_retries=2)


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def logged_upstream(
    lib: Any,
    reply: Callable[[Any], tuple[int, dict[str, str], list[bytes]]],
    prefixes: tuple[str, ...] = ("/v1",),
) -> Upstream:
    """A stub provider whose `.seen` lists each request that reached it as "METHOD /path",
    without the API version `prefixes` (tried in order, the first that matches is cut)."""
    seen: list[str] = []

    def logged(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        path = request.url.path
        cut = next((p for p in prefixes if path.startswith(p)), "")
        seen.append(f"{request.method} {path.removeprefix(cut)}")
        return reply(request)

    stub = Upstream(lib, logged)
    stub.seen = seen  # type: ignore[attr-defined]
    return stub
