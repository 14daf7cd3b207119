"""Every command's `--help`, as a wide terminal shows it: a sentence breaks only where the
terminal's width makes it, never where the source's docstring was wrapped."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pyrula.cli.app import app

WIDTH = 200


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name in command.list_commands(None) if hasattr(command, "list_commands") else ():
        yield from _commands(command.get_command(None, name), (*path, name))


COMMANDS = dict(_commands(typer.main.get_command(app)))


def _texts(command: Any) -> Iterator[str]:
    """What the command's help page shows as prose, each paragraph with its words single-spaced."""
    for paragraph in (command.help or "").split("\n\n"):
        yield " ".join(paragraph.split())
    for param in command.params:
        if getattr(param, "help", None) and not getattr(param, "hidden", False):
            yield " ".join(param.help.split())
    for name in command.list_commands(None) if hasattr(command, "list_commands") else ():
        first = (command.get_command(None, name).help or "").split("\n\n")[0]
        yield " ".join(first.split())


def _unforced_breaks(page: list[str], text: str) -> list[str]:
    """Where `text` is cut across lines of `page` although the next word fit on the line.

    The text is found by its first words; it continues at the same column on the lines below.
    Its cell ends at the panel's right border (or the terminal's edge), less the padding."""
    words = text.split()
    head = " ".join(words[:3])
    for number, line in enumerate(page):
        column = line.find(head)
        if column < 0 or (column > 0 and line[column - 1] not in " │"):
            continue
        pieces: list[tuple[str, int]] = []
        for below in page[number:]:
            border = below.find("│", column)
            edge = border if border >= 0 else WIDTH
            piece = below[column:edge].strip()
            if not piece or (pieces and below[:column].strip(" │")):
                break  # the text ended: a blank cell, or the next row of a table
            pieces.append((piece, edge - column - 1))
            if len(" ".join(p for p, _ in pieces)) >= len(text):
                break
        if not " ".join(p for p, _ in pieces).startswith(text):
            continue  # a different text that starts with the same words
        return [
            f"{piece!r} ⏎ {after!r}"
            for (piece, room), (after, _) in pairwise(pieces)
            if len(piece) + 1 + len(after.split()[0]) < room - 1
        ]
    return [f"not shown on consecutive lines: {text!r}"]


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda path: " ".join(path) or "pyrula")
def test_no_help_text_breaks_mid_sentence_at_a_wide_terminal(path):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    page = result.output.splitlines()
    broken = {text: _unforced_breaks(page, text) for text in _texts(COMMANDS[path]) if text}
    assert {text: where for text, where in broken.items() if where} == {}, result.output


def test_every_command_is_walked():
    names = {" ".join(path) for path in COMMANDS}
    assert {"worker", "proxy", "ui", "runs purge", "mcp serve", "store copy"} <= names
