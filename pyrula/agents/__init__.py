"""Durable agents: `@agent` bodies with spend caps, `@tool`s, and the errors they raise."""

from pyrula.agents.llm import AnthropicLLM, BedrockLLM, GeminiLLM, OpenAILLM
from pyrula.agents.native import (
    Agent,
    MCPServerHTTP,
    MCPServerStdio,
    NativeContext,
    agent,
    stream_to,
)
from pyrula.errors import (
    BudgetExceeded,
    DurableInvocationCancelled,
    ProviderStreamTruncated,
    ReplayInputChanged,
    ToolRefused,
    UnjournaledSurface,
)
from pyrula.runtime import AgentContext, AgentLimits, LLMRate, ToolContext, tool

__all__ = [
    "Agent",
    "AgentContext",
    "AgentLimits",
    "AnthropicLLM",
    "BedrockLLM",
    "BudgetExceeded",
    "DurableInvocationCancelled",
    "GeminiLLM",
    "LLMRate",
    "MCPServerHTTP",
    "MCPServerStdio",
    "NativeContext",
    "OpenAILLM",
    "ProviderStreamTruncated",
    "ReplayInputChanged",
    "ToolContext",
    "ToolRefused",
    "UnjournaledSurface",
    "agent",
    "stream_to",
    "tool",
]
