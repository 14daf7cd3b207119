"""The `pyrula` command line."""

from __future__ import annotations

import typer

from pyrula.cli.demo import demo
from pyrula.cli.journal import journal_app
from pyrula.cli.proxy import proxy
from pyrula.cli.runs import runs_app, worker

app = typer.Typer(
    name="pyrula",
    help="Record, replay and inspect model calls journaled by Pyrula.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(journal_app, name="journal")
app.add_typer(runs_app, name="runs")
app.command("worker")(worker)
app.command("demo")(demo)
app.command("proxy")(proxy)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
