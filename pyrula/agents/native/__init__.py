"""Native agents: the tool-calling loop over Pyrula's own model clients, durable by position."""

from pyrula.agents.native.agent import Agent, NativeContext, agent, stream_to
from pyrula.agents.native.loop import LoopSpec, Toolbox, run_loop
from pyrula.agents.native.mcp import MCPServerHTTP, MCPServerStdio

__all__ = [
    "Agent",
    "LoopSpec",
    "MCPServerHTTP",
    "MCPServerStdio",
    "NativeContext",
    "Toolbox",
    "agent",
    "run_loop",
    "stream_to",
]
