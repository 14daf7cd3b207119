"""A streamable HTTP server with an auth hook: `python -m tests.agents.mcp.http_app PORT`.
A bearer token `token-NAME` is the principal NAME; any other request is refused. With
`--callbacks`, the key comes from an `x-order-key` header and the caller from an `x-tenant`
header (`idempotency_from_request`, `identity_from_request`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from pyrula.agents.mcp import build_mcp_server
from tests.agents.mcp.tools_app import tools


def principal(headers: Mapping[str, str]) -> str | None:
    token = headers.get("authorization", "").removeprefix("Bearer ")
    return token.removeprefix("token-") if token.startswith("token-") else None


def _header(ctx: Any, name: str) -> str | None:
    request = ctx.request_context.request
    return None if request is None else request.headers.get(name)


def key_from_header(ctx: Any) -> str | None:
    return _header(ctx, "x-order-key")


def tenant_from_header(ctx: Any) -> str:
    return _header(ctx, "x-tenant") or "no-tenant"


if __name__ == "__main__":
    callbacks = "--callbacks" in sys.argv
    server = build_mcp_server(
        tools,
        store=os.environ["PYRULA_STORE"],
        idempotency_from_request=key_from_header if callbacks else None,
        identity_from_request=tenant_from_header if callbacks else None,
    )
    server.run_http("127.0.0.1", int(sys.argv[1]), auth=principal)
