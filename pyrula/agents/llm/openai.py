"""`OpenAILLM`: OpenAI's chat completions API (and any OpenAI-compatible host, by `base_url`)."""

from __future__ import annotations

import json
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
    ToolResult,
    ToolSpec,
)
from pyrula.fingerprints import surfaces


def _user_content(parts: Sequence[Part]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, Text) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, Text))
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, Text):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            url = f"data:{part.media_type};base64,{part.b64}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return content


def encode_messages(messages: Sequence[Message], instructions: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    for message in messages:
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            calls = message.tool_calls
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in calls
                ]
            out.append(entry)
            continue
        results = [p for p in message.parts if isinstance(p, ToolResult)]
        out.extend(
            {"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results
        )
        rest = [p for p in message.parts if not isinstance(p, ToolResult)]
        if rest:
            out.append({"role": "user", "content": _user_content(rest)})
    return out


class OpenAILLM(LLM):
    """OpenAI chat completions over HTTP: `OpenAILLM("gpt-4.1-mini")`; `OPENAI_API_KEY`.

    `base_url="https://api.groq.com/openai/v1"` (or any OpenAI-compatible host) speaks the same
    API elsewhere; structured output uses `response_format` with a strict JSON schema."""

    surface = surfaces.OPENAI_CHAT
    rate_key = "openai"
    env_key = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"

    def url(self, *, stream: bool) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"}

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
            "messages": encode_messages(messages, instructions),
            "max_completion_tokens": self.max_tokens,
        }
        specs = list(tools)
        if output is not None and not output.native:
            specs.append(ToolSpec(output.name, "Give the final answer.", output.schema))
            body["tool_choice"] = (
                "required" if tools else {"type": "function", "function": {"name": output.name}}
            )
        elif output is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": output.name, "schema": output.schema},
            }
        if specs:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": s.name,
                        "description": s.description,
                        "parameters": s.parameters,
                    },
                }
                for s in specs
            ]
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def decode(self, data: Any) -> ModelReply:
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        parts: list[Part] = []
        if message.get("content"):
            parts.append(Text(message["content"]))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(
                ToolCall(call["id"], function["name"], loads_arguments(function.get("arguments")))
            )
        return self.reply(parts, choice.get("finish_reason"), data.get("model"), data)

    def stream_turn(self) -> Turn:
        return _ChatTurn(self)


class _ChatTurn(Turn):
    def __init__(self, llm: OpenAILLM) -> None:
        super().__init__(llm)
        self._text: list[str] = []
        self._calls: dict[int, dict[str, str]] = {}
        self._finish: str | None = None
        self._model: str | None = None

    def feed(self, event: Any) -> list[Delta]:
        self._events.append(event)
        self._model = event.get("model") or self._model
        deltas: list[Delta] = []
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self._text.append(delta["content"])
                deltas.append(TextDelta(delta["content"]))
            for call in delta.get("tool_calls") or []:
                index = int(call.get("index", 0))
                slot = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] = function.get("name") or slot["name"]
                piece = function.get("arguments") or ""
                slot["arguments"] += piece
                deltas.append(ToolArgsDelta(index, function.get("name"), piece))
            self._finish = choice.get("finish_reason") or self._finish
        return deltas

    def finish(self) -> ModelReply:
        parts: list[Part] = []
        if self._text:
            parts.append(Text("".join(self._text)))
        for index in sorted(self._calls):
            call = self._calls[index]
            parts.append(ToolCall(call["id"], call["name"], loads_arguments(call["arguments"])))
        return self._reply(parts, self._finish, self._model)
