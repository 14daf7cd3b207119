"""Durable agents: `@agent` bodies with spend caps, `@tool`s, and the errors they raise.

The native agent and its model clients (`Agent`, `OpenAILLM`, ...) load on first use, so a
program that imports only a drop-in (`pyrula.agents.compat.openai`) does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrula.errors import (
    BudgetExceeded,
    DurableInvocationCancelled,
    LiveBudgetExceeded,
    ProviderStreamTruncated,
    ReplayInputChanged,
    ToolRefused,
    UnjournaledSurface,
)
from pyrula.lazy import lazy_exports

if TYPE_CHECKING:
    from pyrula.agents.llm import AnthropicLLM, BedrockLLM, GeminiLLM, OpenAILLM
    from pyrula.agents.native import (
        Agent,
        MCPServerHTTP,
        MCPServerStdio,
        NativeContext,
        agent,
        stream_to,
    )
    from pyrula.runtime import AgentContext, AgentLimits, LLMRate, ToolContext, tool

_LAZY = {
    **dict.fromkeys(
        ("AgentContext", "AgentLimits", "LLMRate", "ToolContext", "tool"), "pyrula.runtime"
    ),
    **dict.fromkeys(("AnthropicLLM", "BedrockLLM", "GeminiLLM", "OpenAILLM"), "pyrula.agents.llm"),
    **dict.fromkeys(
        ("Agent", "MCPServerHTTP", "MCPServerStdio", "NativeContext", "agent", "stream_to"),
        "pyrula.agents.native",
    ),
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


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
    "LiveBudgetExceeded",
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
