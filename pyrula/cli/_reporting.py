"""How every command reports a failure: one line on stderr (a JSON object with `--json`), exit 1.

Kept apart from the commands (and from rich) so that `pyrula worker` starts without them.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import NoReturn

import typer

from pyrula.errors import PyrulaError


@contextmanager
def reported(as_json: bool) -> Iterator[None]:
    """Print a Pyrula error (or an unreadable/unwritable file) as one line; exit 1."""
    try:
        yield
    except BrokenPipeError:
        # The reader went away (`export | head`): stop quietly, as Unix tools do.
        with suppress(OSError, ValueError, io.UnsupportedOperation):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(1) from None
    except (PyrulaError, OSError) as exc:
        fail(exc, as_json)


def fail(exc: Exception, as_json: bool) -> NoReturn:
    text = str(exc)
    if isinstance(exc, OSError) and exc.filename is not None:
        text = f"cannot use {exc.filename}: {exc.strerror}"
    message = " ".join(line.strip() for line in text.splitlines() if line.strip())
    if as_json:
        typer.echo(json.dumps({"error": type(exc).__name__, "message": message}), err=True)
    else:
        typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)
