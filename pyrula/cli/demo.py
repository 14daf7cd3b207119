"""`pyrula demo`: record real SDK calls against a local stand-in provider, then replay them."""

from __future__ import annotations

import typer


def demo() -> None:
    """Record a few OpenAI and Anthropic calls against a local stand-in, then replay offline."""
    typer.echo("pyrula demo: not yet supported in this build", err=True)
    raise typer.Exit(2)
