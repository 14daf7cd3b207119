"""`pyrula demo`: record real SDK calls against a local stand-in provider, then replay them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pyrula.demo.run import render, run_demo, show_journal
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
    """Record a few OpenAI and Anthropic calls against a local stand-in, then replay offline."""
    path = store if store is not None else default_path()
    console = Console()
    try:
        result = run_demo(path)
    except PyrulaError as exc:
        console.print(f"[red]pyrula demo failed:[/] {exc}", highlight=False)
        raise typer.Exit(1) from exc
    render(result, console)
    show_journal(path, console)
    if not result.ok:
        console.print("[red]replay did not reproduce the recording[/]")
        raise typer.Exit(1)
