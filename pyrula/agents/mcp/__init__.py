"""Pyrula tools served over MCP: `build_mcp_server`, each tool call a durable run.

The `mcp` SDK (1.24 to 1.30, or 2.3) is imported only when a server is built or run:
`pip install "pyrula[agents]"`."""

from pyrula.agents.mcp._tools import (
    AtomicToolContext,
    AtomicWorkflowContext,
    register_tools,
    workflow_name,
)
from pyrula.agents.mcp.server import AuthHook, DurableToolServer, build_mcp_server

__all__ = [
    "AtomicToolContext",
    "AtomicWorkflowContext",
    "AuthHook",
    "DurableToolServer",
    "build_mcp_server",
    "register_tools",
    "workflow_name",
]
