"""The demo's MCP server (`python -m pyrula.demo.mcp_tools`, stdio): one tool, `carrier_eta`,
which notes each call in the file named by $PYRULA_DEMO_EFFECTS, so the demo can count them."""

from __future__ import annotations

import os

try:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server
except ImportError:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server  # type: ignore[no-redef]

server = Server("pyrula-demo-carrier", log_level="WARNING")


@server.tool()
def carrier_eta(order: str) -> str:
    """When the carrier expects to deliver an order."""
    with open(os.environ.get("PYRULA_DEMO_EFFECTS", os.devnull), "a") as effects:
        effects.write(f"mcp carrier_eta {order}\n")
    return "the carrier expects it on Thursday"


if __name__ == "__main__":
    server.run(transport="stdio")
