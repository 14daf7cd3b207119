"""Durable runs: workflows and agents whose steps, tools and model calls replay after a crash."""

from pyrula.errors import ToolRefused
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
from pyrula.runtime.metering import prices
from pyrula.runtime.ratelimit import LLMRate
from pyrula.runtime.registry import Definition, ToolDefinition, agent, tool, workflow
from pyrula.runtime.runstore import Event, RunRecord, RunStore
from pyrula.runtime.worker import Worker

__all__ = [
    "AgentContext",
    "AgentLimits",
    "Definition",
    "Event",
    "LLMRate",
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
