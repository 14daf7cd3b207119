"""`pyrula worker`: claim queued runs from the store and execute them.

Apart from the other commands, and importing no rich, so that a worker starts with the runtime,
typer and the user's modules only (`pyrula.cli.app` loads the other commands when they are used).
The user's modules import with the garbage collector paused, then frozen (`_collector`).

No `from __future__ import annotations` here: typer reads the command's signature, and string
annotations would each be parsed and evaluated again at every start.
"""

import asyncio
import importlib
import logging
import signal
import sys
from typing import Annotated

import typer

from pyrula.cli._collector import importing
from pyrula.cli._options import StoreOption
from pyrula.cli._reporting import reported
from pyrula.cli._worker_log import install as install_log
from pyrula.cli._worker_log import say
from pyrula.journal.store import Store
from pyrula.runtime import ToolDefinition, Worker
from pyrula.runtime.retention import parse_duration


def _import_or_exit(module: str) -> None:
    """Import a module of workflows; a failure is one line naming the module, not a traceback."""
    try:
        importlib.import_module(module)
    except Exception as exc:  # whatever the user's module raised while importing
        where = ""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None and not isinstance(exc, ModuleNotFoundError):
            where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
        typer.echo(
            f"pyrula worker: cannot import {module!r}: {type(exc).__name__}: {exc}{where}",
            err=True,
        )
        raise typer.Exit(2) from None


def _served_tools(modules: list[str]) -> list[str]:
    """For each imported module defining `@tool`s (what `pyrula mcp serve` serves) the
    `pyrula mcp worker` command that registers them as the workflows running their calls."""
    commands = []
    for module in modules:
        found = vars(sys.modules[module])
        tools = [name for name, value in found.items() if isinstance(value, ToolDefinition)]
        lists = [
            name
            for name, value in found.items()
            if isinstance(value, list | tuple)
            and value
            and all(isinstance(item, ToolDefinition) for item in value)
        ]
        if lists or len(tools) == 1:
            commands.append(f"pyrula mcp worker --import {module}:{(lists or tools)[0]}")
        elif tools:
            commands.append(
                f"pyrula mcp worker --import {module}:TOOLS, TOOLS being a list of its tools "
                f"({', '.join(tools)})"
            )
    return commands


def worker(
    imports: Annotated[
        list[str],
        typer.Option("--import", "-i", help="Module defining workflows/agents (repeatable)."),
    ],
    store: StoreOption = None,
    lease_seconds: Annotated[float, typer.Option(help="Lease length; heartbeats renew it.")] = 15,
    until_idle: Annotated[
        bool, typer.Option(help="Exit once no run this worker can take is left.")
    ] = False,
    concurrency: Annotated[int, typer.Option(help="Runs executed at once.")] = 8,
    create: Annotated[
        bool, typer.Option("--create", help="Create the store if it does not exist yet.")
    ] = False,
    grace: Annotated[
        float,
        typer.Option(
            "--grace",
            metavar="SECONDS",
            help="On Ctrl-C or SIGTERM, how long runs in flight get to finish before their "
            "leases are released to another worker (a second Ctrl-C releases at once).",
        ),
    ] = 10,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No line per run; warnings only.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Log JSON lines (one object per event) on stderr.")
    ] = False,
    retention: Annotated[
        str | None,
        typer.Option(
            "--retention",
            metavar="DURATION",
            help="Purge runs that ended longer ago than this (30d, 12h), at start and hourly.",
        ),
    ] = None,
) -> None:
    """Claim queued runs from the store and execute them, until stopped (Ctrl-C or SIGTERM:
    drain, then release)."""
    sys.path.insert(0, ".")
    with importing():
        for module in imports:
            _import_or_exit(module)
    with reported(False):
        opened = Store(store, create=create)
    with opened:  # closed here, not left to the interpreter's exit
        install_log(as_json=as_json, quiet=quiet)
        try:
            kept = parse_duration(retention) if retention is not None else None
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--retention") from None
        runner = Worker(
            opened,
            lease_seconds=lease_seconds,
            concurrency=concurrency,
            grace_seconds=grace,
            retention=kept,
        )
        names = sorted(runner.claimable())
        say(
            "started",
            f"pyrula worker {runner.worker_id} on {runner.store.location} "
            f"(lease {lease_seconds:g}s, {concurrency} at once, grace {grace:g}s): "
            f"{', '.join(names) or 'no workflows'}",
            worker=runner.worker_id,
            store=str(runner.store.location),
            workflows=names,
        )

        if not names:
            served = _served_tools(imports)
            hint = "pass --import with the module that defines them"
            if served:
                hint = "to execute MCP tool calls, run " + "; or ".join(served)
            say(
                "no_workflows",
                f"no workflow or agent is imported, so this worker claims no run; {hint}",
                level=logging.WARNING,
                mcp_worker=served,
            )

        async def main() -> int:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, runner.stop)
            return await runner.run(until_idle=until_idle)

        executed = asyncio.run(main())
        say("stopped", f"pyrula worker: {executed} attempt(s) executed", executed=executed)
