"""`pyrula demo`: record real SDK calls against a local stand-in provider, then replay them."""

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
    """Record a few OpenAI and Anthropic calls against a local stand-in, then replay offline."""
    console = Console()
    try:
        # Imported here: the SDKs are an optional extra and slow to import.
        from pyrula.demo import run
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
    if not result.ok:
        console.print("[red]the replay did not reproduce the recording[/]")
        raise typer.Exit(1)
