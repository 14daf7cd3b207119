"""`pyrula import-vcr PATH...`: vcrpy / pytest-recording YAML cassettes into text cassettes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pyrula.cli._reporting import reported
from pyrula.journal.vcr_import import convert


def import_vcr(
    paths: Annotated[
        list[Path],
        typer.Argument(help="YAML cassettes, or folders to search for them (tests/cassettes)."),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the text cassettes here instead of beside each YAML."),
    ] = None,
) -> None:
    """Convert vcrpy cassettes: each x.yaml becomes x.json beside it (pytest-recording's layout
    is the plugin's), fingerprinted, streams split into frames, secrets scrubbed. Then mark the
    tests @pytest.mark.pyrula (or run pytest with --pyrula-vcr-markers). Exits 1 if anything
    could not be converted, listing what and why."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        typer.echo(f"no such file or folder: {', '.join(missing)}", err=True)
        raise typer.Exit(2)
    with reported(False):  # PyYAML not installed: one line naming the pip command
        results = convert(paths, out=out)
    if not results:
        typer.echo("no .yaml or .yml cassettes found", err=True)
        raise typer.Exit(2)
    left = 0
    for result in results:
        where = f" -> {result.target}" if result.target else ""
        typer.echo(f"{result.source}: {result.converted} converted{where}")
        for reason in result.skipped:
            typer.echo(f"  not converted: {reason}")
        left += len(result.skipped)
    total = sum(r.converted for r in results)
    typer.echo(f"{total} interaction(s) converted in {len(results)} file(s); {left} not converted")
    if left:
        raise typer.Exit(1)
