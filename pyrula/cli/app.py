"""The `pyrula` command line."""

from __future__ import annotations

from importlib import metadata
from typing import Annotated

import typer

from pyrula.cli.demo import demo
from pyrula.cli.import_vcr import import_vcr
from pyrula.cli.journal import journal_app
from pyrula.cli.mcp import mcp_app
from pyrula.cli.proxy import proxy
from pyrula.cli.runs import runs_app, worker
from pyrula.cli.store import store_app
from pyrula.cli.ui import ui

app = typer.Typer(
    name="pyrula",
    help="Record, replay and inspect model calls journaled by Pyrula.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pyrula {metadata.version('pyrula')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Record, replay and inspect model calls journaled by Pyrula."""


app.add_typer(journal_app, name="journal")
app.add_typer(runs_app, name="runs")
app.add_typer(mcp_app, name="mcp")
app.command("worker")(worker)
app.command("demo")(demo)
app.command("proxy")(proxy)
app.add_typer(store_app, name="store")
app.command("ui")(ui)
app.command("import-vcr")(import_vcr)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
