"""A real MCP server (the `mcp` SDK's FastMCP) for the native agent's tests: `forecast` logs
each call to $MCP_EFFECTS; `broken` always fails. `python mcp_server.py` speaks stdio;
`python mcp_server.py http PORT` serves streamable HTTP on 127.0.0.1:PORT/mcp."""

from __future__ import annotations

import os
import sys

from mcp.server.fastmcp import FastMCP

port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
server = FastMCP("weather", host="127.0.0.1", port=port, log_level="WARNING")


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
    server.run(transport="streamable-http" if sys.argv[1:2] == ["http"] else "stdio")
