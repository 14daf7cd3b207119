"""MCP tools (`mcp.client`): each tool an MCP server lists becomes an ordinary `@tool`.

`MCPServerStdio(command, args)` and `MCPServerHTTP(url, headers=...)` name a server; given to
an agent's `mcp_servers=`, the server's `tools/list` is journaled as a step the first time the
run meets it, and each call the model makes runs as a `@tool` whose result (or error) is
journaled: a resumed run replays both without contacting the server, so it completes while the
server is down. The client is the `mcp` SDK's own (`pip install 'pyrula[mcp]'`); each call opens
a session of its own, so a run holds no connection across a crash.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from pyrula.agents.llm.messages import ToolSpec
from pyrula.errors import MCPToolError, MissingExtra
from pyrula.runtime import ToolDefinition, WorkflowContext, tool


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise MissingExtra("mcp_servers=", "mcp", (exc.name,), needs="the MCP SDK") from exc
    return mcp


@contextlib.contextmanager
def _server_errlog() -> Iterator[TextIO]:
    """Where the server process's stderr goes: ours when it is a real file; else (a notebook, a
    test runner capturing output) nowhere, since a subprocess needs a file descriptor."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        with open(os.devnull, "w") as devnull:
            yield devnull
        return
    yield sys.stderr


@dataclass(frozen=True)
class MCPServerStdio:
    """An MCP server started as a subprocess speaking stdio: `MCPServerStdio("uvx", ["srv"])`."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name or " ".join([self.command, *self.args])

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        mcp = _sdk()
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.command, args=list(self.args), env=dict(self.env) if self.env else None
        )
        with _server_errlog() as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):  # noqa: SIM117
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    yield session


@dataclass(frozen=True)
class MCPServerHTTP:
    """An MCP server over streamable HTTP: `MCPServerHTTP(url, headers={"authorization": ...})`.
    The headers are sent, never journaled."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name or self.url

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        mcp = _sdk()
        from mcp.client import streamable_http

        # The HTTP stack the SDK is built on: httpx for mcp 1.x, httpx2 for 2.x.
        lib: Any = getattr(streamable_http, "httpx2", None) or importlib.import_module("httpx")
        sdk: Any = streamable_http
        async with contextlib.AsyncExitStack() as stack:
            opened: Any
            if hasattr(sdk, "streamable_http_client"):  # mcp >= 1.24, and 2.x
                http = await stack.enter_async_context(
                    lib.AsyncClient(headers=dict(self.headers), timeout=lib.Timeout(30, read=300))
                )
                opened = sdk.streamable_http_client(self.url, http_client=http)
            else:
                opened = sdk.streamablehttp_client(self.url, headers=dict(self.headers))
            streams = await stack.enter_async_context(opened)
            read, write = streams[0], streams[1]
            session = await stack.enter_async_context(mcp.ClientSession(read, write))
            await session.initialize()
            yield session


MCPServer = MCPServerStdio | MCPServerHTTP


async def list_tools(server: MCPServer) -> list[dict[str, Any]]:
    """The server's `tools/list`: name, description and input schema of each tool."""
    async with server.session() as session:
        listed = await session.list_tools()
    return [
        {
            "name": t.name,
            "description": t.description or t.name,
            "input_schema": dict(
                _field(t, "input_schema", "inputSchema") or {"type": "object", "properties": {}}
            ),
        }
        for t in listed.tools
    ]


def _field(value: Any, name: str, camel: str) -> Any:
    """A field of an SDK type: snake_case in mcp 2.x, camelCase in 1.x."""
    return getattr(value, name, None) if hasattr(value, name) else getattr(value, camel, None)


def _result(result: Any, name: str) -> Any:
    texts = [getattr(c, "text", "") for c in result.content if getattr(c, "type", "") == "text"]
    if _field(result, "is_error", "isError"):
        raise MCPToolError(f"MCP tool {name!r} failed: {' '.join(texts)}")
    structured = _field(result, "structured_content", "structuredContent")
    if structured is not None:
        return structured
    return texts[0] if len(texts) == 1 else texts


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner


def as_tool(server: MCPServer, listed: dict[str, Any]) -> tuple[ToolDefinition[..., Any], ToolSpec]:
    """One listed MCP tool as a `@tool` (calling the server) and the spec the model sees."""
    name = str(listed["name"])

    async def call(**arguments: Any) -> Any:
        try:
            async with server.session() as session:
                result = await session.call_tool(name, arguments)
        except BaseExceptionGroup as group:  # the SDK's task group wraps what failed
            raise _first(group) from None
        return _result(result, name)

    call.__name__ = name
    spec = ToolSpec(name, str(listed["description"]), dict(listed["input_schema"]))
    return tool(name=name)(call), spec


async def mcp_tools(
    ctx: WorkflowContext, servers: Sequence[MCPServer]
) -> list[tuple[ToolDefinition[..., Any], ToolSpec]]:
    """Every tool of `servers`, their `tools/list` journaled as steps (replayed on a resume)."""
    found: list[tuple[ToolDefinition[..., Any], ToolSpec]] = []
    for server in servers:
        listed = await ctx.step(f"mcp:tools/list {server.label}", list_tools, server)
        found.extend(as_tool(server, entry) for entry in listed)
    return found
