"""`pyrula store check`: walk a store and list what is damaged."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from pyrula.errors import PyrulaError
from pyrula.journal.check import Damage, check
from pyrula.journal.keys import describe_key
from pyrula.journal.store import Store

store_app = typer.Typer(help="Check a journal store.", no_args_is_help=True, add_completion=False)


def damage_json(item: Damage) -> dict[str, Any]:
    """One damaged thing as a JSON object."""
    return {
        "damaged": item.where,
        "key": describe_key(item.key) if item.where == "exchange" else item.key.hex(),
        "id": item.record_id,
        "reason": item.reason,
    }


def damage_text(item: Damage) -> str:
    """One damaged thing as a line of text."""
    name = describe_key(item.key) if item.where == "exchange" else f"blob {item.key.hex()}"
    return f"{name}: {item.reason}"


@store_app.command("check")
def check_command(
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="PYRULA_STORE",
            show_default=False,
            help="Store folder or postgresql:// URL.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Read every exchange, frame page and request part; list what is damaged (exit code 1).

    Example: pyrula store check --store ./.pyrula
    """
    try:
        opened = Store(store, create=False, readonly=True)
        try:
            report = check(opened)
        finally:
            opened.close()
    except PyrulaError as exc:
        message = str(exc)
        if as_json:
            typer.echo(json.dumps({"error": type(exc).__name__, "message": message}), err=True)
        else:
            typer.echo(f"error: {message}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "exchanges": report.exchanges,
                    "blobs": report.blobs,
                    "damaged": [damage_json(item) for item in report.damage],
                }
            )
        )
    else:
        for item in report.damage:
            typer.echo(f"damaged: {damage_text(item)}")
        state = f"{len(report.damage)} damaged" if report.damage else "no damage found"
        typer.echo(f"{report.exchanges} exchanges, {report.blobs} request parts read: {state}")
    if not report.ok:
        raise typer.Exit(1)
