"""`build_mcp_server`: Pyrula tools served over MCP, each call a durable run a worker executes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyrula.agents.mcp._calls import CallOptions, unavailable
from pyrula.agents.mcp._sdk import IDENTITY_SCOPE_KEY, Callback, build_sdk_server
from pyrula.agents.mcp._tools import ServedTool, register_tools
from pyrula.errors import StoreError
from pyrula.journal.store import Store, open_store

# `run_http(auth=...)`: given the request's headers, the caller's principal, or None to refuse
# the request with 401.
AuthHook = Callable[[Mapping[str, str]], str | None]


@dataclass
class DurableToolServer:
    """Tools served over MCP. `run_stdio()` or `run_http(host, port)`; `sdk_server()` is the
    SDK's own server object (`FastMCP` on mcp 1.x, `MCPServer` on 2.x) for anything else."""

    name: str
    tools: list[ServedTool]
    store: Store
    options: CallOptions
    idempotency_from_request: Callback | None = None
    identity_from_request: Callback | None = None
    _servers: list[Any] = field(default_factory=list, repr=False)

    def sdk_server(self, **server_kwargs: Any) -> Any:
        """A new SDK server with this server's tools (keyword arguments go to its constructor)."""
        return build_sdk_server(
            self.name,
            self.tools,
            self.store,
            self.options,
            self.idempotency_from_request,
            self.identity_from_request,
            **server_kwargs,
        )

    def run_stdio(self) -> None:
        """Serve one client over stdin/stdout until it closes them (what desktop clients run)."""
        import anyio

        anyio.run(self.sdk_server().run_stdio_async)

    def http_app(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        auth: AuthHook | None = None,
        allowed_hosts: list[str] | None = None,
        path: str = "/mcp",
    ) -> Any:
        """The streamable HTTP app (an ASGI app), with the SDK's Host and Origin checks on and,
        given `auth`, every request refused with 401 unless `auth(headers)` names a principal."""
        from mcp.server.transport_security import TransportSecuritySettings

        hosts = allowed_hosts or [f"{host}:{port}", f"{host}:*"]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts],
        )
        server = self.sdk_server()
        if hasattr(server, "settings") and hasattr(server.settings, "transport_security"):
            server.settings.transport_security = security  # mcp 1.x: read from its settings
            server.settings.streamable_http_path = path
            app = server.streamable_http_app()
        else:
            app = server.streamable_http_app(
                streamable_http_path=path, transport_security=security, host=host
            )
        return app if auth is None else _Authenticated(app, auth)

    def run_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        auth: AuthHook | None = None,
        allowed_hosts: list[str] | None = None,
        path: str = "/mcp",
    ) -> None:
        """Serve streamable HTTP at http://HOST:PORT/mcp until stopped (see `http_app`)."""
        import uvicorn

        app = self.http_app(host, port, auth=auth, allowed_hosts=allowed_hosts, path=path)
        uvicorn.run(app, host=host, port=port, log_level="warning")


class _Authenticated:
    """ASGI middleware: the `auth` hook decides who may call, and who the caller is."""

    def __init__(self, app: Any, auth: AuthHook) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        principal = self.auth(headers)
        if not principal:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"text/plain")],
                }
            )
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        scope[IDENTITY_SCOPE_KEY] = principal
        await self.app(scope, receive, send)


def build_mcp_server(
    tools: Iterable[Any],
    *,
    store: Store | str | os.PathLike[str] | None = None,
    name: str = "pyrula",
    idempotency_from_request: Callback | None = None,
    identity_from_request: Callback | None = None,
    worker_timeout: float | None = None,
    poll_seconds: float = 0.05,
) -> DurableToolServer:
    """Serve `tools` (`@tool`s or plain functions) over MCP; each call is a durable run.

    The server submits a run per call and waits for it; a `pyrula worker` on the same `store`
    that imports the module building this server executes it. `idempotency_from_request(ctx)`
    and `identity_from_request(ctx)` get the SDK's request `Context` and return the call's key
    (default: `_meta.idempotency_key`) and its caller (default: the authenticated principal,
    else "anonymous"). `worker_timeout` seconds with no worker on a call end it with
    `ToolServerUnavailable` (None waits). Refuses a `requires_approval=True` tool with
    `ToolRegistrationError`."""
    served = register_tools(tools)
    try:
        opened = store if isinstance(store, Store) else open_store(store)
    except StoreError as exc:
        raise unavailable(exc) from exc
    return DurableToolServer(
        name,
        served,
        opened,
        CallOptions(worker_timeout=worker_timeout, poll_seconds=poll_seconds),
        idempotency_from_request,
        identity_from_request,
    )
