"""`pyrula demo`: record real SDK calls against a local stand-in provider, then replay them;
then run a durable agent against it, SIGKILL its worker mid-run and resume it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pyrula.errors import PyrulaError
from pyrula.journal.store import default_path


def demo(
    store: Annotated[
        Path | None,
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
        from pyrula.demo import durable, run
    except ImportError as exc:
        console.print(
            f"pyrula demo needs the openai and anthropic SDKs ({exc}); "
            "install them with: pip install 'pyrula[agents]'",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(2) from exc
    path = store if store is not None else default_path()
    try:
        result = run.run_demo(path)
    except PyrulaError as exc:
        console.print(f"[red]pyrula demo failed:[/] {exc}", highlight=False)
        raise typer.Exit(1) from exc
    run.render(result, console)
    run.show_journal(path, console)

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
    durable.render(outcome, console)

    failed = False
    if not result.ok:
        console.print("[red]the replay did not reproduce the recording[/]")
        failed = True
    for failure in outcome.failures():
        console.print(f"[red]durable run:[/] {failure}", highlight=False)
        failed = True
    if failed:
        raise typer.Exit(1)
