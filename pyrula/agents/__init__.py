"""Durable agents: `@agent` bodies with spend caps, `@tool`s, and the errors they raise."""

from pyrula.errors import (
    BudgetExceeded,
    DurableInvocationCancelled,
    ProviderStreamTruncated,
    ReplayInputChanged,
    ToolRefused,
    UnjournaledSurface,
)
from pyrula.runtime import AgentContext, AgentLimits, LLMRate, ToolContext, agent, tool

__all__ = [
    "AgentContext",
    "AgentLimits",
    "BudgetExceeded",
    "DurableInvocationCancelled",
    "LLMRate",
    "ProviderStreamTruncated",
    "ReplayInputChanged",
    "ToolContext",
    "ToolRefused",
    "UnjournaledSurface",
    "agent",
    "tool",
]
