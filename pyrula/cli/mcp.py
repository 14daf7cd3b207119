"""`pyrula mcp serve` and `pyrula mcp worker`: a durable MCP tool server without writing code."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer

from pyrula.cli._options import StoreOption
from pyrula.cli.worker import worker

mcp_app = typer.Typer(help="Serve Pyrula tools over MCP, each call a durable run.")

ToolsOption = Annotated[
    str,
    typer.Option(
        "--import",
        "-i",
        metavar="MODULE:NAME",
        help="The tools to serve: a module and the name of its list of tools (app:tools).",
    ),
]


def load_tools(spec: str) -> list[Any]:
    """`module:name` → the list of tools it names (a list, tuple, or one tool)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        typer.echo(f"pyrula mcp: --import takes MODULE:NAME (app:tools), not {spec!r}", err=True)
        raise typer.Exit(2)
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
        found = getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        typer.echo(f"pyrula mcp: cannot load {spec!r}: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    return list(found) if isinstance(found, list | tuple) else [found]


def _host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        typer.echo(f"pyrula mcp: --http takes HOST:PORT (127.0.0.1:8000), not {value!r}", err=True)
        raise typer.Exit(2)
    return host, int(port)


@mcp_app.command("serve")
def serve(
    tools: ToolsOption,
    store: StoreOption = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http", metavar="HOST:PORT", help="Serve streamable HTTP here instead of stdio."
        ),
    ] = None,
    name: Annotated[str, typer.Option(help="The server name clients see.")] = "pyrula",
    worker_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="End a call with an error when no worker takes it within this long.",
        ),
    ] = None,
) -> None:
    """Serve the tools over MCP (stdio unless --http). Run `pyrula mcp worker` with the same
    --import and --store to execute the calls."""
    from pyrula.agents.mcp import build_mcp_server

    server = build_mcp_server(
        load_tools(tools), store=store, name=name, worker_timeout=worker_timeout
    )
    if http is None:
        server.run_stdio()
    else:
        host, port = _host_port(http)
        server.run_http(host, port)


@mcp_app.command("worker")
def mcp_worker(
    tools: ToolsOption,
    store: StoreOption = None,
    create: Annotated[
        bool, typer.Option("--create", help="Create the store if it does not exist yet.")
    ] = False,
    until_idle: Annotated[
        bool, typer.Option(help="Exit once no run this worker can take is left.")
    ] = False,
    concurrency: Annotated[int, typer.Option(help="Runs executed at once.")] = 8,
    lease_seconds: Annotated[float, typer.Option(help="Lease length; heartbeats renew it.")] = 15,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Warnings only.")] = False,
) -> None:
    """Execute the tool calls a `pyrula mcp serve` on the same store submits."""
    from pyrula.agents.mcp import register_tools

    register_tools(load_tools(tools))
    worker(
        [],
        store=store,
        lease_seconds=lease_seconds,
        until_idle=until_idle,
        concurrency=concurrency,
        create=create,
        quiet=quiet,
    )
