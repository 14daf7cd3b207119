"""`GeminiLLM`: the Gemini API's `generateContent` over HTTP."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyrula.agents.llm.client import LLM, Turn
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


def _part(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"text": part.text}
    if isinstance(part, Image):
        return {"inlineData": {"mimeType": part.media_type, "data": part.b64}}
    if isinstance(part, ToolCall):
        call: dict[str, Any] = {"name": part.name, "args": part.arguments}
        return {"functionCall": call}
    key = "error" if part.is_error else "result"
    return {"functionResponse": {"name": part.name, "response": {key: part.content}}}


def decode_parts(raw: Sequence[dict[str, Any]]) -> list[Part]:
    parts: list[Part] = []
    for part in raw:
        if part.get("text") and not part.get("thought"):
            parts.append(Text(part["text"]))
        elif "functionCall" in part:
            call = part["functionCall"]
            parts.append(ToolCall(call.get("id") or "", call["name"], dict(call.get("args") or {})))
    return parts


class GeminiLLM(LLM):
    """Gemini over HTTP: `GeminiLLM("gemini-2.5-flash")`; `GEMINI_API_KEY` or `GOOGLE_API_KEY`.

    Structured output uses `responseMimeType: application/json` with `responseJsonSchema`."""

    surface = surfaces.GEMINI_GENERATE
    rate_key = "gemini"
    env_key = "GEMINI_API_KEY"
    default_base_url = "https://generativelanguage.googleapis.com"

    @property
    def api_key(self) -> str:
        import os

        if not self._api_key and not os.environ.get(self.env_key):
            self._api_key = os.environ.get("GOOGLE_API_KEY") or None
        return super().api_key

    def url(self, *, stream: bool) -> str:
        verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{self.base_url}/v1beta/models/{self.model}:{verb}"

    def headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self.api_key}

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
            "contents": [
                {
                    "role": "model" if m.role == "assistant" else "user",
                    "parts": [_part(p) for p in m.parts],
                }
                for m in messages
            ],
            "generationConfig": {"maxOutputTokens": self.max_tokens},
        }
        if instructions:
            body["systemInstruction"] = {"parts": [{"text": instructions}]}
        if tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": s.name,
                            "description": s.description,
                            "parametersJsonSchema": s.parameters,
                        }
                        for s in tools
                    ]
                }
            ]
        if output is not None:
            body["generationConfig"].update(
                responseMimeType="application/json", responseJsonSchema=output.schema
            )
        return body

    def decode(self, data: Any) -> ModelReply:
        candidate = (data.get("candidates") or [{}])[0]
        parts = decode_parts((candidate.get("content") or {}).get("parts") or [])
        return self.reply(parts, candidate.get("finishReason"), data.get("modelVersion"), data)

    def stream_turn(self) -> Turn:
        return _GeminiTurn(self)


class _GeminiTurn(Turn):
    def __init__(self, llm: GeminiLLM) -> None:
        super().__init__(llm)
        self._parts: list[Part] = []
        self._finish: str | None = None

    def feed(self, event: Any) -> list[Delta]:
        self._events.append(event)
        candidate = (event.get("candidates") or [{}])[0]
        self._finish = candidate.get("finishReason") or self._finish
        deltas: list[Delta] = []
        for part in decode_parts((candidate.get("content") or {}).get("parts") or []):
            if isinstance(part, Text):
                deltas.append(TextDelta(part.text))
            elif isinstance(part, ToolCall):
                count = sum(isinstance(p, ToolCall) for p in self._parts)
                deltas.append(ToolArgsDelta(count, part.name, json.dumps(part.arguments)))
            self._parts.append(part)
        return deltas

    def finish(self) -> ModelReply:
        text = "".join(p.text for p in self._parts if isinstance(p, Text))
        calls = [p for p in self._parts if isinstance(p, ToolCall)]
        parts: list[Part] = [Text(text)] if text else []
        parts.extend(calls)
        model = next((e.get("modelVersion") for e in reversed(self._events)), None)
        return self._reply(parts, self._finish, model)


__all__ = ["GeminiLLM"]
