"""The provider-neutral conversation: messages, tool definitions, tool calls, usage and replies.

Every native model client (`OpenAILLM`, `AnthropicLLM`, `GeminiLLM`, `BedrockLLM`) takes a list
of `Message`s and `ToolSpec`s and hands back a `ModelReply`; the agent loop speaks only these.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Text:
    """A piece of text in a message."""

    text: str


@dataclass(frozen=True, slots=True)
class Image:
    """An image in a user message: its bytes and media type (sent inline, base64)."""

    data: bytes
    media_type: str = "image/png"

    @property
    def b64(self) -> str:
        return base64.b64encode(self.data).decode()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for: the provider's id, the tool's name, its arguments."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returned (JSON-encoded text), or its error when `is_error`."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


Part = Text | Image | ToolCall | ToolResult


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of the conversation: `user` (text, images, tool results) or `assistant`
    (text and tool calls). System instructions are passed to the client separately."""

    role: Literal["user", "assistant"]
    parts: tuple[Part, ...]

    @classmethod
    def user(cls, *parts: Part | str) -> Message:
        return cls("user", tuple(Text(p) if isinstance(p, str) else p for p in parts))

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """A structured output the reply must take: a JSON schema, by the provider's native
    structured-output mode (`native=True`) or by forcing a call to the tool `name`."""

    name: str
    schema: dict[str, Any]
    native: bool = True


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one reply reported, cache reads and writes apart."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One model turn: the assistant message, why it stopped, its usage, and the provider's
    own reply (`raw`: the parsed JSON body, or the list of stream events)."""

    message: Message
    stop_reason: str | None
    usage: Usage
    model: str | None = None
    raw: Any = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        return self.message.text

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.message.tool_calls


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A live piece of streamed text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolArgsDelta:
    """A live piece of a streamed tool call's JSON arguments (`index` orders the calls)."""

    index: int
    name: str | None
    arguments: str


Delta = TextDelta | ToolArgsDelta

__all__ = [
    "Delta",
    "Image",
    "Message",
    "ModelReply",
    "OutputSpec",
    "Part",
    "Text",
    "TextDelta",
    "ToolArgsDelta",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
]
