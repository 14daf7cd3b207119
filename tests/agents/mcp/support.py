"""Shared pieces of the MCP tests: the real `mcp` client of either major, the server as a
real `pyrula mcp serve` process (stdio or streamable HTTP), and the tools' side-effect log."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp

from tests.fakes.clock import wait_until

ROOT = Path(__file__).parents[3]
TOOLS = "tests.agents.mcp.tools_app:tools"
WORKER_MODULE = "tests.agents.mcp.worker_app"
MAJOR = 2 if hasattr(mcp, "Client") else 1


@dataclass
class Setup:
    """A fresh store, the tools' log and gate, and the environment the processes share."""

    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pyrula-mcp-")))

    @property
    def store(self) -> Path:
        return self.folder / "store"

    @property
    def log(self) -> Path:
        return self.folder / "tools.log"

    @property
    def gate(self) -> Path:
        return self.folder / "gate"

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYRULA_STORE": str(self.store),
            "MCP_TOOL_LOG": str(self.log),
            "MCP_TOOL_GATE": str(self.gate),
        }

    def open_gate(self, order_id: str) -> None:
        """Let a held `charge_card` of `order_id` go on to its effect."""
        Path(f"{self.gate}.{order_id}").touch()

    def lines(self, prefix: str = "effect") -> list[str]:
        """The side effects the tools logged (lines starting with `prefix`)."""
        if not self.log.exists():
            return []
        return [x for x in self.log.read_text().splitlines() if x.startswith(prefix)]

    def worker(self, *, mcp_cli: bool = False) -> WorkerProcess:
        """A real worker on the store: `pyrula worker --import` a module registering the tools,
        or (`mcp_cli`) `pyrula mcp worker --import MODULE:TOOLS`."""
        return WorkerProcess(self, mcp_cli=mcp_cli)

    def serve_command(self, *flags: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pyrula.cli.app",
            "mcp",
            "serve",
            "--import",
            TOOLS,
            "--store",
            str(self.store),
            *flags,
        ]


class WorkerProcess:
    """`pyrula worker --import tests.agents.mcp.worker_app` (or `pyrula mcp worker --import
    tests.agents.mcp.tools_app:tools`), its stderr in a file."""

    def __init__(self, setup: Setup, *, mcp_cli: bool = False) -> None:
        self.stderr = setup.folder / f"worker-{time.monotonic_ns()}.log"
        cli = (
            ["mcp", "worker", "--import", TOOLS]
            if mcp_cli
            else ["worker", "--import", WORKER_MODULE]
        )
        command = [sys.executable, "-m", "pyrula.cli.app", *cli]
        with self.stderr.open("w") as err:
            self.process = subprocess.Popen(
                [*command, "--store", str(setup.store), "--create"],
                cwd=ROOT,
                env=setup.env,
                stdin=subprocess.DEVNULL,
                stderr=err,
            )
        wait_until(lambda: "pyrula worker" in self.stderr.read_text(), "the worker to start")

    def kill(self) -> None:
        """SIGKILL (a real process death), then reap it."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpServer:
    """A real `pyrula mcp serve --http` process."""

    def __init__(self, setup: Setup, *flags: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            setup.serve_command("--http", f"127.0.0.1:{self.port}", *flags),
            cwd=ROOT,
            env=setup.env,
            stdin=subprocess.DEVNULL,
        )
        wait_until(self._listening, f"the MCP server on port {self.port}")

    def _listening(self) -> bool:
        assert self.process.poll() is None, "the MCP server exited"
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Client:
    """The SDK's client, one interface on both majors."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def list_tools(self) -> dict[str, dict[str, Any]]:
        """`tools/list` as on the wire (camelCase on both majors), by tool name."""
        listed = (await self.session.list_tools()).tools
        return {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in listed}

    async def call(self, name: str, arguments: dict[str, Any], key: str | None = None) -> Reply:
        meta = {"idempotency_key": key} if key is not None else None
        result = await self.session.call_tool(name, arguments, meta=meta)
        wire = result.model_dump(by_alias=True)
        return Reply(text(result), bool(wire.get("isError")))

    async def cancel_latest(self, tasks: Any) -> None:
        """Cancel the call in flight as the client would: mcp 2.x sends
        `notifications/cancelled` when a call is abandoned; 1.x leaves it to the caller."""
        if MAJOR == 1:
            from mcp import types

            # Request ids count from 0 (initialize) per session: the first call is 1.
            cancelled = types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=1)
            )
            await self.session.send_notification(types.ClientNotification(cancelled))
        tasks.cancel_scope.cancel()


@dataclass(frozen=True)
class Reply:
    """A `tools/call` result: its text, and whether it is a tool error (`isError`)."""

    text: str
    isError: bool


@contextlib.asynccontextmanager
async def stdio(setup: Setup, *flags: str) -> AsyncIterator[Client]:
    """A client of `pyrula mcp serve` over stdio (the client starts the server process)."""
    command = setup.serve_command(*flags)
    params = mcp.StdioServerParameters(
        command=command[0], args=command[1:], env=setup.env, cwd=str(ROOT)
    )
    if MAJOR == 2:
        async with mcp.Client(params) as client:
            yield Client(client)
        return
    from mcp.client.stdio import stdio_client

    async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        yield Client(session)


# The SDK's own HTTP client timeouts (`mcp.shared._httpx_utils`: 30 s, and 300 s to read, on both
# majors). The server answers a `tools/call` when its run ends, with no bytes before: after a
# worker is killed that is once a new worker process has started and run the tool again, seconds
# under load. httpx's default (5 s for every read) failed such a call with `ReadTimeout`.
MCP_TIMEOUT = {"timeout": 30.0, "read": 300.0}


@contextlib.asynccontextmanager
async def http(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """A client of a streamable HTTP server, with the SDK's default timeouts (`MCP_TIMEOUT`)."""
    if MAJOR == 2:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client as transport

        async with (
            httpx2.AsyncClient(
                headers=headers or {}, timeout=httpx2.Timeout(**MCP_TIMEOUT)
            ) as http_client,
            mcp.Client(transport(url, http_client=http_client)) as c,
        ):
            yield Client(c)
        return
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx.AsyncClient(headers=headers or {}, timeout=httpx.Timeout(**MCP_TIMEOUT)) as client,
        streamable_http_client(url, http_client=client) as (read, write, _),
        mcp.ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Client(session)


def text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)
