"""A canonical request read as a conversation: who said what, the tools offered, the parameters.

The canonical document keeps each provider's own shape (`messages` for OpenAI and Anthropic,
`contents` with `parts` for Gemini, `messages` with `content` blocks for Bedrock converse,
`input` for OpenAI responses); this reads them all into turns of (role, text) without deciding
anything a replay depends on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        for name in ("text", "content", "input_text", "output_text"):
            if isinstance(content.get(name), str):
                return str(content[name])
        if "parts" in content:
            return _text_of(content["parts"])
        return json.dumps(content, ensure_ascii=False)
    return json.dumps(content, ensure_ascii=False)


def turns(compared: dict[str, Any]) -> list[Turn]:
    """The request's messages in order, the system prompt first when it is kept apart."""
    found: list[Turn] = []
    for name in ("system", "instructions", "system_instruction", "systemInstruction"):
        if compared.get(name):
            found.append(Turn("system", _text_of(compared[name])))
    messages = compared.get("messages") or compared.get("contents") or compared.get("input")
    if isinstance(messages, str):
        return [*found, Turn("user", messages)]
    for message in messages or []:
        if not isinstance(message, dict):
            found.append(Turn("?", _text_of(message)))
            continue
        role = str(message.get("role") or message.get("type") or "?")
        body = message.get("content", message.get("parts"))
        text = _text_of(body)
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            text += f"\n→ {function.get('name')}({function.get('arguments', '')})"
        found.append(Turn(role, text.strip()))
    return found


def tool_names(compared: dict[str, Any]) -> list[str]:
    names = []
    for tool in compared.get("tools") or []:
        if isinstance(tool, dict):
            function = tool.get("function") or tool
            names.append(str(function.get("name") or tool.get("type") or "?"))
    return names
