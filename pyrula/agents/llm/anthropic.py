"""`AnthropicLLM`: Anthropic's messages API over HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyrula.agents.llm.client import LLM, Turn, loads_arguments
from pyrula.agents.llm.messages import (
    Delta,
    Image,
    Message,
    ModelReply,
    OutputSpec,
    Part,
    Text,
    TextDelta,
    ToolArgsDelta,
    ToolCall,
    ToolSpec,
)
from pyrula.fingerprints import surfaces

API_VERSION = "2023-06-01"


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        source = {"type": "base64", "media_type": part.media_type, "data": part.b64}
        return {"type": "image", "source": source}
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
    return {
        "type": "tool_result",
        "tool_use_id": part.call_id,
        "content": part.content,
        "is_error": part.is_error,
    }


def decode_blocks(blocks: Sequence[dict[str, Any]]) -> tuple[Part, ...]:
    parts: list[Part] = []
    for block in blocks:
        if block.get("type") == "text" and block.get("text"):
            parts.append(Text(block["text"]))
        elif block.get("type") == "tool_use":
            parts.append(ToolCall(block["id"], block["name"], dict(block.get("input") or {})))
    return tuple(parts)


class AnthropicLLM(LLM):
    """Anthropic messages over HTTP: `AnthropicLLM("claude-sonnet-4-5")`; `ANTHROPIC_API_KEY`.

    Structured output is a forced tool call (`tool_choice: {"type": "tool"}`)."""

    surface = surfaces.ANTHROPIC_MESSAGES
    rate_key = "anthropic"
    env_key = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"
    native_output = False

    def url(self, *, stream: bool) -> str:
        return f"{self.base_url}/v1/messages"

    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.api_key, "anthropic-version": API_VERSION}

    def encode(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None,
        tools: Sequence[ToolSpec],
        output: OutputSpec | None,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": [
                {"role": m.role, "content": [_block(p) for p in m.parts]} for m in messages
            ],
        }
        if instructions:
            body["system"] = instructions
        specs = list(tools)
        if output is not None:
            specs.append(ToolSpec(output.name, "Give the final answer.", output.schema))
            body["tool_choice"] = (
                {"type": "any"} if tools else {"type": "tool", "name": output.name}
            )
        if specs:
            body["tools"] = [
                {"name": s.name, "description": s.description, "input_schema": s.parameters}
                for s in specs
            ]
        if stream:
            body["stream"] = True
        return body

    def decode(self, data: Any) -> ModelReply:
        return self.reply(
            decode_blocks(data.get("content") or []),
            data.get("stop_reason"),
            data.get("model"),
            data,
        )

    def stream_turn(self) -> Turn:
        return _MessagesTurn(self)


class _MessagesTurn(Turn):
    def __init__(self, llm: AnthropicLLM) -> None:
        super().__init__(llm)
        self._blocks: dict[int, dict[str, Any]] = {}
        self._stop: str | None = None
        self._model: str | None = None

    def feed(self, event: Any) -> list[Delta]:
        self._events.append(event)
        kind = event.get("type")
        index = int(event.get("index", 0))
        if kind == "message_start":
            self._model = (event.get("message") or {}).get("model")
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            block["json"] = ""
            self._blocks[index] = block
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            block = self._blocks.setdefault(index, {"type": "text", "text": "", "json": ""})
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
                return [TextDelta(delta["text"])]
            if delta.get("type") == "input_json_delta":
                block["json"] += delta.get("partial_json", "")
                return [ToolArgsDelta(index, block.get("name"), delta.get("partial_json", ""))]
        elif kind == "message_delta":
            self._stop = (event.get("delta") or {}).get("stop_reason") or self._stop
        return []

    def finish(self) -> ModelReply:
        blocks = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.get("type") == "tool_use":
                block = {**block, "input": loads_arguments(block["json"]) or block.get("input")}
            blocks.append(block)
        return self._reply(decode_blocks(blocks), self._stop, self._model)


__all__ = ["AnthropicLLM"]
