"""A real MCP server (the `mcp` SDK's FastMCP) for the native agent's tests: `forecast` logs
each call to $MCP_EFFECTS; `broken` always fails. `python mcp_server.py` speaks stdio;
`python mcp_server.py http PORT` serves streamable HTTP on 127.0.0.1:PORT/mcp."""

from __future__ import annotations

import os
import sys

port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
try:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("weather", host="127.0.0.1", port=port, log_level="WARNING")
    HTTP: dict[str, object] = {}
except ImportError:  # mcp 2.x renamed it, and takes the address when it runs
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("weather", log_level="WARNING")
    HTTP = {"host": "127.0.0.1", "port": port}


@server.tool()
def forecast(city: str) -> str:
    """Tomorrow's forecast for a city."""
    with open(os.environ.get("MCP_EFFECTS", os.devnull), "a") as log:
        log.write(f"forecast {city}\n")
    return f"{city}: snow, -2"


@server.tool()
def broken(city: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no data for {city}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run(transport="streamable-http", **HTTP)
    else:
        server.run(transport="stdio")
