"""Durable runs: workflows and agents whose steps, tools and model calls replay after a crash.

The names below load on first use, so a drop-in that needs only `pyrula.runtime.calls` does not
import the worker, the run client and the run store with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrula.errors import ToolRefused
from pyrula.lazy import lazy_exports

if TYPE_CHECKING:
    from pyrula.runtime.client import (
        RunHandle,
        answer,
        cancel,
        fork,
        purge,
        resume,
        signal,
        submit,
    )
    from pyrula.runtime.context import AgentContext, ToolContext, WorkflowContext
    from pyrula.runtime.limits import AgentLimits
    from pyrula.runtime.live_budget import LiveBudget, LiveSpend
    from pyrula.runtime.pricing import prices
    from pyrula.runtime.ratelimit import LLMRate
    from pyrula.runtime.registry import Definition, agent, workflow
    from pyrula.runtime.runstore import Event, RunRecord, RunStore
    from pyrula.runtime.tools import ToolDefinition, tool
    from pyrula.runtime.worker import Worker

_WHERE: dict[str, str] = {
    **dict.fromkeys(
        ("RunHandle", "answer", "cancel", "fork", "purge", "resume", "signal", "submit"),
        "pyrula.runtime.client",
    ),
    **dict.fromkeys(("AgentContext", "ToolContext", "WorkflowContext"), "pyrula.runtime.context"),
    "AgentLimits": "pyrula.runtime.limits",
    **dict.fromkeys(("LiveBudget", "LiveSpend"), "pyrula.runtime.live_budget"),
    "prices": "pyrula.runtime.pricing",
    "LLMRate": "pyrula.runtime.ratelimit",
    **dict.fromkeys(("Definition", "agent", "workflow"), "pyrula.runtime.registry"),
    **dict.fromkeys(("ToolDefinition", "tool"), "pyrula.runtime.tools"),
    **dict.fromkeys(("Event", "RunRecord", "RunStore"), "pyrula.runtime.runstore"),
    "Worker": "pyrula.runtime.worker",
}

__all__ = [
    "AgentContext",
    "AgentLimits",
    "Definition",
    "Event",
    "LLMRate",
    "LiveBudget",
    "LiveSpend",
    "RunHandle",
    "RunRecord",
    "RunStore",
    "ToolContext",
    "ToolDefinition",
    "ToolRefused",
    "Worker",
    "WorkflowContext",
    "agent",
    "answer",
    "cancel",
    "fork",
    "prices",
    "purge",
    "resume",
    "signal",
    "submit",
    "tool",
    "workflow",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
