"""A tool-calling model, stood in for all four wire formats (OpenAI chat, Anthropic messages,
Gemini, Bedrock Converse): a script of turns, the next one chosen by how many assistant turns
the request already holds, so a resumed run asking the same thing gets the same answer.

A turn is `calls(("lookup", {"city": "Paris"}), ...)` (the model asks for tools, in parallel)
or `text("...")` (a final answer; JSON text for a structured output). In the forced-tool
structured-output mode (Anthropic, Bedrock) a `text` turn whose text is JSON is sent as a call
to the output tool `final_result` instead, as those providers would.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx2

from tests.fakes.bedrock_api import CONTENT_TYPE, encode_message
from tests.fakes.provider import Reply, Upstream, json_reply, sse_reply

PROVIDERS = ("openai", "anthropic", "gemini", "bedrock")
USAGE = {"input": 10, "output": 5}


@dataclass(frozen=True)
class Turn:
    text: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def calls(*requested: tuple[str, dict[str, Any]]) -> Turn:
    return Turn(calls=tuple(requested))


def text(answer: str) -> Turn:
    return Turn(text=answer)


def assistant_turns(provider: str, body: dict[str, Any]) -> int:
    if provider == "gemini":
        return sum(1 for c in body.get("contents", []) if c.get("role") == "model")
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def _forced(provider: str, body: dict[str, Any]) -> bool:
    if provider == "anthropic":
        return any(t["name"] == "final_result" for t in body.get("tools", []))
    if provider == "bedrock":
        tools = (body.get("toolConfig") or {}).get("tools", [])
        return any(t["toolSpec"]["name"] == "final_result" for t in tools)
    return False


def _as_calls(turn: Turn, forced: bool) -> list[tuple[str, str, dict[str, Any]]]:
    found = [(f"call_{name}_{i}", name, args) for i, (name, args) in enumerate(turn.calls)]
    if forced and turn.text.startswith("{"):
        found.append(("call_final", "final_result", json.loads(turn.text)))
    return found


def reply_for(provider: str, turn: Turn, body: dict[str, Any], *, stream: bool) -> Reply:
    forced = _forced(provider, body)
    requested = _as_calls(turn, forced)
    words = "" if forced and turn.text.startswith("{") else turn.text
    return _BUILDERS[provider](words, requested, stream)


def _openai(words: str, requested: list[Any], stream: bool) -> Reply:
    usage = {
        "prompt_tokens": USAGE["input"],
        "completion_tokens": USAGE["output"],
        "total_tokens": USAGE["input"] + USAGE["output"],
    }
    tool_calls = [
        {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for cid, n, a in requested
    ]
    finish = "tool_calls" if requested else "stop"
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": words or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return json_reply(
            {
                "id": "chatcmpl-a",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-test",
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": usage,
            }
        )
    base = {
        "id": "chatcmpl-a",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-test",
    }
    chunks: list[Any] = []
    for word in words.split(" ") if words else []:
        chunks.append({**base, "choices": [{"index": 0, "delta": {"content": word + " "}}]})
    for i, call in enumerate(tool_calls):
        args = call["function"]["arguments"]
        head = {
            "index": i,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": args[:3]},
        }
        tail = {"index": i, "function": {"arguments": args[3:]}}
        for piece in (head, tail):
            delta = {"tool_calls": [piece]}
            chunks.append({**base, "choices": [{"index": 0, "delta": delta}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": usage})
    frames = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
    return sse_reply(frames)


def _anthropic(words: str, requested: list[Any], stream: bool) -> Reply:
    content: list[dict[str, Any]] = [{"type": "text", "text": words}] if words else []
    content += [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in requested]
    stop = "tool_use" if requested else "end_turn"
    usage = {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"]}
    message = {
        "id": "msg_a",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not stream:
        return json_reply(message)

    def named(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": USAGE["input"], "output_tokens": 0},
    }
    frames = [named("message_start", {"message": start})]
    for index, block in enumerate(content):
        if block["type"] == "text":
            frames.append(
                named(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            for word in words.split(" "):
                delta = {"type": "text_delta", "text": word + " "}
                frames.append(named("content_block_delta", {"index": index, "delta": delta}))
        else:
            opened = {**block, "input": {}}
            frames.append(named("content_block_start", {"index": index, "content_block": opened}))
            args = json.dumps(block["input"])
            for piece in (args[:3], args[3:]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                frames.append(named("content_block_delta", {"index": index, "delta": delta}))
        frames.append(named("content_block_stop", {"index": index}))
    frames.append(
        named(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": USAGE["output"]},
            },
        )
    )
    frames.append(named("message_stop", {}))
    return sse_reply(frames)


def _gemini(words: str, requested: list[Any], stream: bool) -> Reply:
    parts: list[dict[str, Any]] = [{"text": words}] if words else []
    parts += [{"functionCall": {"name": n, "args": a}} for _, n, a in requested]
    usage = {
        "promptTokenCount": USAGE["input"],
        "candidatesTokenCount": USAGE["output"],
        "totalTokenCount": USAGE["input"] + USAGE["output"],
    }
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": usage,
        "modelVersion": "gemini-test",
    }
    if not stream:
        return json_reply(body)
    frames = [f"data: {json.dumps(body)}\r\n\r\n".encode()]
    return 200, {"content-type": "text/event-stream"}, frames


def _bedrock(words: str, requested: list[Any], stream: bool) -> Reply:
    content: list[dict[str, Any]] = [{"text": words}] if words else []
    content += [{"toolUse": {"toolUseId": c, "name": n, "input": a}} for c, n, a in requested]
    stop = "tool_use" if requested else "end_turn"
    usage = {
        "inputTokens": USAGE["input"],
        "outputTokens": USAGE["output"],
        "totalTokens": USAGE["input"] + USAGE["output"],
    }
    if not stream:
        return json_reply(
            {
                "output": {"message": {"role": "assistant", "content": content}},
                "stopReason": stop,
                "usage": usage,
                "metrics": {"latencyMs": 1},
            }
        )

    def event(kind: str, payload: dict[str, Any]) -> bytes:
        headers = {
            ":message-type": "event",
            ":event-type": kind,
            ":content-type": "application/json",
        }
        return encode_message(headers, json.dumps(payload).encode())

    frames = [event("messageStart", {"role": "assistant"})]
    for index, block in enumerate(content):
        if "text" in block:
            delta = {"contentBlockIndex": index, "delta": {"text": block["text"]}}
            frames.append(event("contentBlockDelta", delta))
        else:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            frames.append(event("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            delta = {"toolUse": {"input": json.dumps(use["input"])}}
            frames.append(event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
    frames.append(event("messageStop", {"stopReason": stop}))
    frames.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
    return 200, {"content-type": CONTENT_TYPE}, frames


_BUILDERS = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini, "bedrock": _bedrock}


def _streamed(provider: str, request: Any, body: dict[str, Any]) -> bool:
    path = request.url.path
    return bool(body.get("stream")) or "stream" in path.rsplit("/", 1)[-1]


def scripted(provider: str, turns: Sequence[Turn]) -> Any:
    """The reply function of a scripted model (for `Upstream` or `server.serving`)."""

    def reply(request: Any) -> Reply:
        body = json.loads(request.content)
        index = min(assistant_turns(provider, body), len(turns) - 1)
        return reply_for(provider, turns[index], body, stream=_streamed(provider, request, body))

    return reply


def upstream(provider: str, turns: Sequence[Turn]) -> Upstream:
    """An in-process scripted model; `.calls` logs each request body that reached it."""
    return Upstream(httpx2, scripted(provider, turns), ())


MODELS = {
    "openai": "gpt-test",
    "anthropic": "claude-test",
    "gemini": "gemini-test",
    "bedrock": "anthropic.claude-test-v1:0",
}


def model_for(
    provider: str,
    *,
    stand_in: Upstream | None = None,
    base_url: str = "http://model.test",
    **kw: Any,
) -> Any:
    """Pyrula's native client for `provider`, sending to `stand_in` (in process) or to
    `base_url` (a `server.Server`); Bedrock with a planted API key unless `kw` says otherwise."""
    from pyrula.agents import AnthropicLLM, BedrockLLM, GeminiLLM, OpenAILLM
    from tests.fakes.provider import TEST_KEY

    classes = {
        "openai": OpenAILLM,
        "anthropic": AnthropicLLM,
        "gemini": GeminiLLM,
        "bedrock": BedrockLLM,
    }
    transport = stand_in.transport() if stand_in is not None else None
    options: dict[str, Any] = {
        "api_key": TEST_KEY,
        "base_url": base_url,
        "transport": transport,
        "max_retries": 0,
        **kw,
    }
    return classes[provider](MODELS[provider], **options)
