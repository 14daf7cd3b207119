"""The demo's MCP server (`python -m pyrula.demo.mcp_tools`, stdio): one tool, `carrier_eta`,
which notes each call in the file named by $PYRULA_DEMO_EFFECTS, so the demo can count them."""

from __future__ import annotations

import importlib
import os
from typing import Any


def carrier_eta(order: str) -> str:
    """When the carrier expects to deliver an order."""
    with open(os.environ.get("PYRULA_DEMO_EFFECTS", os.devnull), "a") as effects:
        effects.write(f"mcp carrier_eta {order}\n")
    return "the carrier expects it on Thursday"


def _server() -> Any:
    """The mcp SDK's high-level server: `FastMCP` on 1.x, `MCPServer` on 2.x."""
    try:
        cls = importlib.import_module("mcp.server.fastmcp").FastMCP
    except (ImportError, AttributeError):
        cls = importlib.import_module("mcp.server.mcpserver").MCPServer
    server = cls("pyrula-demo-carrier", log_level="WARNING")
    server.tool()(carrier_eta)
    return server


if __name__ == "__main__":
    _server().run(transport="stdio")
