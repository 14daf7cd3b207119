"""Pyrula's own model clients: each provider's HTTP API over httpx2, journaled like any call."""

from pyrula.agents.llm.anthropic import AnthropicLLM
from pyrula.agents.llm.bedrock import BedrockLLM
from pyrula.agents.llm.client import LLM, DeltaHandler
from pyrula.agents.llm.gemini import GeminiLLM
from pyrula.agents.llm.messages import (
    Delta,
    Image,
    Message,
    ModelReply,
    OutputSpec,
    Text,
    TextDelta,
    ToolArgsDelta,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from pyrula.agents.llm.openai import OpenAILLM

__all__ = [
    "LLM",
    "AnthropicLLM",
    "BedrockLLM",
    "Delta",
    "DeltaHandler",
    "GeminiLLM",
    "Image",
    "Message",
    "ModelReply",
    "OpenAILLM",
    "OutputSpec",
    "Text",
    "TextDelta",
    "ToolArgsDelta",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
]
