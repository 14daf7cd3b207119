"""The real `mcp` client over streamable HTTP: the auth hook, caller-scoped keys, Host checks."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.agents.mcp.support import ROOT, HttpServer, Setup, free_port, http
from tests.fakes.clock import wait_until


class AuthServer(HttpServer):
    def __init__(self, setup: Setup, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.agents.mcp.http_app", str(self.port), *flags],
            cwd=ROOT,
            env=setup.env,
            stdin=subprocess.DEVNULL,
        )
        wait_until(self._listening, f"the MCP server on port {self.port}")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Setup, AuthServer]]:
    setup = Setup()
    worker = setup.worker(mcp_cli=True)
    server = AuthServer(setup)
    yield setup, server
    server.kill()
    worker.kill()


def call_as(url: str, who: str, name: str, args: dict[str, Any], key: str | None) -> Any:
    async def main() -> Any:
        async with http(url, {"Authorization": f"Bearer token-{who}"}) as client:
            return await client.call(name, args, key)

    return anyio.run(main)


def test_calls_over_http_are_durable_runs_scoped_to_the_caller(
    served: tuple[Setup, AuthServer],
) -> None:
    setup, server = served
    alice = call_as(server.url, "alice", "charge_card", {"order_id": "h-1", "cents": 2}, "k")
    again = call_as(server.url, "alice", "charge_card", {"order_id": "h-1", "cents": 2}, "k")
    bob = call_as(server.url, "bob", "charge_card", {"order_id": "h-1", "cents": 2}, "k")
    assert not alice.isError and again.text == alice.text and not bob.isError
    # One run for alice's key, another for bob's: a key is scoped to its caller.
    assert setup.lines("effect h-1") == ["effect h-1 2", "effect h-1 2"]


def test_tools_list_over_http_shows_read_only_hint(served: tuple[Setup, AuthServer]) -> None:
    _, server = served

    async def main() -> dict[str, dict[str, Any]]:
        async with http(server.url, {"Authorization": "Bearer token-alice"}) as client:
            return await client.list_tools()

    listed = anyio.run(main)
    assert listed["lookup"]["annotations"]["readOnlyHint"] is True


def test_the_auth_hook_refuses_a_request_without_a_principal(
    served: tuple[Setup, AuthServer],
) -> None:
    _, server = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    reply = httpx.post(server.url, json=body, headers={"Authorization": "Bearer nope"})
    assert reply.status_code == 401


def test_the_sdk_host_check_refuses_a_foreign_host(served: tuple[Setup, AuthServer]) -> None:
    _, server = served
    reply = httpx.post(
        server.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": "Bearer token-alice",
            "Host": "evil.example:80",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert reply.status_code in (400, 403, 421)


def test_callbacks_take_the_key_and_the_caller_from_any_request_field() -> None:
    setup = Setup()
    worker = setup.worker()
    server = AuthServer(setup, "--callbacks")

    def call(tenant: str, key: str, cents: int) -> Any:
        headers = {"Authorization": "Bearer token-x", "x-tenant": tenant, "x-order-key": key}

        async def main() -> Any:
            async with http(server.url, headers) as client:
                return await client.call("charge_card", {"order_id": "cb", "cents": cents})

        return anyio.run(main)

    try:
        first = call("acme", "k", 1)
        again = call("acme", "k", 1)
        other_args = call("acme", "k", 2)
        other_tenant = call("globex", "k", 1)
    finally:
        server.kill()
        worker.kill()
    assert again.text == first.text and not again.isError
    assert other_args.isError and "IdempotencyConflict" in other_args.text
    assert not other_tenant.isError
    assert setup.lines("effect cb") == ["effect cb 1", "effect cb 1"]
