"""`pyrula demo`: record real SDK calls against a local stand-in provider, then replay them;
then run a durable agent against it, SIGKILL its worker mid-run and resume it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from pyrula.cli.journal import journal_app
from pyrula.cli.runs import show
from pyrula.errors import MissingExtra, NotYetSupported, PyrulaError
from pyrula.journal.store import default_location, default_path, is_url


def demo(
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="Store folder to record into (default: $PYRULA_STORE or ./.pyrula).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Record a few OpenAI and Anthropic calls against a local stand-in, then replay offline;
    then run a durable agent, SIGKILL its worker mid-run, resume it, and count provider calls."""
    console = Console()
    try:
        # Imported here: the SDKs are an optional extra and slow to import.
        from pyrula.demo import durable, native, run
    except ImportError as exc:
        missing = MissingExtra(
            "pyrula demo", "agents", (exc.name,), needs="the openai and anthropic SDKs"
        )
        console.print(str(missing), markup=False, highlight=False)
        raise typer.Exit(2) from exc
    if is_url(store or default_location()):
        refused = NotYetSupported(
            "pyrula demo runs on a folder store only; give --store a folder (the PostgreSQL "
            "store works everywhere else: see docs/scaling.md)"
        )
        console.print(f"[red]pyrula demo:[/] {refused}", highlight=False)
        raise typer.Exit(2) from refused
    path = Path(store) if store is not None else default_path()
    try:
        result = run.run_demo(path)
    except PyrulaError as exc:
        console.print(f"[red]pyrula demo failed:[/] {exc}", highlight=False)
        raise typer.Exit(1) from exc
    run.render(result, console)
    show_journal(path, console)

    console.print(
        f"\n[bold]durable run[/]: agent {durable.AGENT_NAME!r} in real worker processes; the "
        f"first is killed with SIGKILL after {durable.KILL_AFTER} of its "
        f"{len(durable.QUESTIONS)} model calls, a second resumes the run",
        highlight=False,
    )
    try:
        outcome = durable.run_durable(
            path, say=lambda line: console.print(line, markup=False, highlight=False)
        )
    except PyrulaError as exc:
        console.print(f"[red]pyrula demo failed:[/] {exc}", highlight=False)
        raise typer.Exit(1) from exc
    durable.render(outcome, console, show_run)

    console.print(
        f"\n[bold]native agent[/]: {native.AGENT_NAME!r}, Pyrula's own tool-calling loop (no "
        "provider SDK) with a @tool and an MCP server's tool, live, then replayed",
        highlight=False,
    )
    try:
        agent_run = native.run_native(path)
    except PyrulaError as exc:
        console.print(f"[red]pyrula demo failed:[/] {exc}", highlight=False)
        raise typer.Exit(1) from exc
    native.render(agent_run, lambda line: console.print(line, markup=False, highlight=False))

    failed = False
    if not result.ok:
        console.print("[red]the replay did not reproduce the recording[/]")
        failed = True
    for failure in outcome.failures():
        console.print(f"[red]durable run:[/] {failure}", highlight=False)
        failed = True
    for failure in agent_run.failures():
        console.print(f"[red]native agent:[/] {failure}", highlight=False)
        failed = True
    if failed:
        raise typer.Exit(1)


# -- what the demo left in the store, shown by the CLI's own commands ------------------------------


def journal_ls_command() -> Any:
    """The click command of `pyrula journal ls`, or None while this build has none."""
    try:
        group: Any = typer.main.get_group(journal_app)
    except Exception:
        return None
    commands = getattr(group, "commands", None)
    return commands.get("ls") if isinstance(commands, dict) else None


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def show_journal(store_path: str | os.PathLike[str], console: Console) -> None:
    """List what the demo left in the store: `pyrula journal ls` if present, else its own table."""
    from pyrula.demo.run import CASSETTE, list_exchanges  # the demo's SDKs are imported lazily

    command = journal_ls_command()
    args = [CASSETTE, "--store", str(store_path)]
    if command is not None:
        params = {getattr(param, "name", ""): param for param in command.params}
        options = {opt for param in command.params for opt in getattr(param, "opts", ())}
        positional = [
            name
            for name, param in params.items()
            if getattr(param, "param_type_name", "") == "argument"
        ]
        args = [CASSETTE] if positional[:1] in (["prefix"], ["cassette"], ["namespace"]) else []
        args += ["--store", str(store_path)] if "--store" in options else []
    console.print(f"\n$ pyrula journal ls {' '.join(args)}", markup=False, highlight=False)
    if command is not None:
        try:
            with _env("PYRULA_STORE", str(store_path)):
                code = command.main(args=args, prog_name="pyrula journal ls", standalone_mode=False)
        except Exception as exc:  # typer's own (vendored) click errors included
            code = f"{type(exc).__name__}: {exc}"
        if not code:
            return
        console.print(f"(pyrula journal ls failed: {code}; listing directly)", highlight=False)
    list_exchanges(store_path, console)


def show_run(store: Path, run_id: str, console: Console) -> None:
    """`pyrula runs show RUN --store STORE`, or the demo's listing of the events if that fails."""
    from pyrula.demo.durable import list_events  # the demo's SDKs are imported lazily

    # Not wrapped: the command line stays one line, to copy.
    console.print(
        f"\n$ pyrula runs show {run_id} --store {store}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    try:
        show(run_id, store=str(store), as_json=False)
        return
    except Exception as exc:  # typer.Exit included: list the events ourselves
        console.print(
            f"(pyrula runs show failed: {type(exc).__name__}: {exc}; listing directly)",
            markup=False,
            highlight=False,
        )
    list_events(store, run_id, console)
