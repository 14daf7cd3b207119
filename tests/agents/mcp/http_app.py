"""A streamable HTTP server with an auth hook: `python -m tests.agents.mcp.http_app PORT`.
A bearer token `token-NAME` is the principal NAME; any other request is refused."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyrula.agents.mcp import build_mcp_server
from tests.agents.mcp.tools_app import tools


def principal(headers: Mapping[str, str]) -> str | None:
    token = headers.get("authorization", "").removeprefix("Bearer ")
    return token.removeprefix("token-") if token.startswith("token-") else None


if __name__ == "__main__":
    server = build_mcp_server(tools, store=os.environ["PYRULA_STORE"])
    server.run_http("127.0.0.1", int(sys.argv[1]), auth=principal)
