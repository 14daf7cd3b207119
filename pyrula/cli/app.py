"""The `pyrula` command line."""

from __future__ import annotations

import importlib
import inspect
from importlib import metadata
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from pyrula.cli._collector import program
from pyrula.cli.worker import worker

# The commands that load when they are used: (module, its Typer app or command function). Each
# pulls in rich and its own helpers, which `pyrula worker` (registered below) never needs.
_LAZY: dict[str, tuple[str, str]] = {
    "journal": ("pyrula.cli.journal", "journal_app"),
    "runs": ("pyrula.cli.runs", "runs_app"),
    "mcp": ("pyrula.cli.mcp", "mcp_app"),
    "demo": ("pyrula.cli.demo", "demo"),
    "proxy": ("pyrula.cli.proxy", "proxy"),
    "store": ("pyrula.cli.store", "store_app"),
    "ui": ("pyrula.cli.ui", "ui"),
    "import-vcr": ("pyrula.cli.import_vcr", "import_vcr"),
}


def unwrapped(text: str) -> str:
    """A docstring or help string as the terminal should wrap it: each paragraph on one line.

    Typer's rich help keeps the single line breaks a docstring is wrapped with (in a group's
    list of commands, and in a command's paragraphs after the first), so a sentence broke where
    the source line did. A paragraph starting with `\\b` (click's "keep as written") is kept."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def _unwrap_help(command: Any) -> None:
    """`unwrapped` on the help of `command`, its options and (for a group) every subcommand."""
    if command.help:
        command.help = unwrapped(command.help)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = unwrapped(param.help)
    for sub in getattr(command, "commands", {}).values():
        _unwrap_help(sub)


class _LazyGroup(TyperGroup):
    """The `pyrula` group: a command named in `_LAZY` is imported the first time it is asked
    for (to run it, or to list it in `--help`). Every command's help is `unwrapped` once, as it
    is looked up (the group's own, as it is made)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _unwrap_help(self)

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in _LAZY if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in _LAZY:
            return found
        module, attr = _LAZY[cmd_name]
        target: Any = getattr(importlib.import_module(module), attr)
        if isinstance(target, typer.Typer):
            command: Any = typer.main.get_group(target)  # a group even with one command
        else:
            single = typer.Typer(add_completion=False)
            single.command(cmd_name)(target)
            command = typer.main.get_command(single)
        command.name = cmd_name
        _unwrap_help(command)
        self.add_command(command, cmd_name)
        return command


app = typer.Typer(
    name="pyrula",
    help="Record, replay and inspect model calls journaled by Pyrula.",
    no_args_is_help=True,
    add_completion=False,
    cls=_LazyGroup,
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


app.command("worker")(worker)


def main() -> None:
    """The `pyrula` program (also `python -m pyrula.cli.app`): the process ends with it."""
    with program():
        app()


if __name__ == "__main__":
    main()
