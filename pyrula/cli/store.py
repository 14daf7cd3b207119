"""`pyrula store`: check, migrate, copy and count a journal store."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from pyrula.cli._options import JsonOption, StoreOption
from pyrula.errors import PyrulaError, StoreError
from pyrula.journal.check import Damage, check
from pyrula.journal.copy import copy_store
from pyrula.journal.keys import describe_key
from pyrula.journal.store import Store, display, is_url

store_app = typer.Typer(
    help="Check, migrate, copy and count a journal store.",
    no_args_is_help=True,
    add_completion=False,
)


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
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read every exchange, frame page and request part; list what is damaged (exit code 1).

    Example: pyrula store check --store ./.pyrula
    """
    try:
        opened = Store(store, create=False, readonly=True)
        try:
            report = check(opened)
            waiting = _waiting(opened)
        finally:
            opened.close()
    except PyrulaError as exc:
        raise _fail(exc, as_json) from None
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "exchanges": report.exchanges,
                    "blobs": report.blobs,
                    "damaged": [damage_json(item) for item in report.damage],
                    "waiting": waiting,
                }
            )
        )
    else:
        for item in report.damage:
            typer.echo(f"damaged: {damage_text(item)}")
        state = f"{len(report.damage)} damaged" if report.damage else "no damage found"
        typer.echo(f"{report.exchanges} exchanges, {report.blobs} request parts read: {state}")
        if any(waiting.values()):
            typer.echo(
                f"waiting in logs: {waiting['recordings']} recording(s), "
                f"{waiting['run_facts']} run fact(s), not in the store's tables yet (not "
                "checked here): a running process puts its own in within about a second, a "
                "stopped one's go in when a process next opens the store to write"
            )
    if not report.ok:
        raise typer.Exit(1)


def _fail(exc: PyrulaError, as_json: bool) -> typer.Exit:
    if as_json:
        typer.echo(json.dumps({"error": type(exc).__name__, "message": str(exc)}), err=True)
    else:
        typer.echo(f"error: {exc}", err=True)
    return typer.Exit(1)


@store_app.command("migrate")
def migrate_command(
    url: Annotated[str, typer.Argument(metavar="URL", help="A postgresql:// store.")],
    as_json: JsonOption = False,
) -> None:
    """Bring a PostgreSQL store's schema up to this Pyrula's (creating it in an empty
    database); forward only. A folder (LMDB) store needs no migration.

    Example: pyrula store migrate postgresql://pyrula@db.internal/pyrula
    """
    if not is_url(url):
        raise _fail(
            StoreError(f"{url} is not a postgresql:// URL; LMDB stores need no migrate"), as_json
        )
    try:
        with Store(url, migrate=True) as opened:
            schema = opened.stat()["schema"]
    except PyrulaError as exc:
        raise _fail(exc, as_json) from None
    where = display(url)
    typer.echo(
        json.dumps({"store": where, "schema": schema}) if as_json else f"{where}: schema {schema}"
    )


@store_app.command("copy")
def copy_command(
    source: Annotated[
        str, typer.Argument(metavar="SRC", help="The store to read (folder or URL).")
    ],
    target: Annotated[str, typer.Argument(metavar="DST", help="An empty or new store.")],
    as_json: JsonOption = False,
) -> None:
    """Copy every exchange, request part, run, event, queue entry, lease, token and flag from
    SRC into DST (LMDB to PostgreSQL and back), byte for byte. DST must hold nothing yet.

    Example: pyrula store copy ./.pyrula postgresql://pyrula@db.internal/pyrula
    """
    try:
        left = _take_in_stopped_logs(source)
        with Store(source, create=False, readonly=True) as src, Store(target) as dst:
            counts = copy_store(src, dst)
    except PyrulaError as exc:
        raise _fail(exc, as_json) from None
    if left is not None:
        typer.echo(
            f"warning: recordings or run facts that stopped processes left in {display(source)}'s "
            f"logs are not in the copy: they could not be put in its tables first ({left}); "
            "open it for writing (any pyrula command that writes to it) and copy again",
            err=True,
        )
    if as_json:
        typer.echo(json.dumps({"copied": counts, "not_taken_in": left}))
    else:
        total = ", ".join(f"{count} {name}" for name, count in counts.items() if count)
        typer.echo(f"copied {total or 'nothing'} into {display(target)}")


def _waiting(store: Store) -> dict[str, int]:
    """What a folder store's logs hold that its tables do not have yet: recordings of cassette
    blocks (`pending.py`) and facts of runs executing alone (`fact_log`)."""
    from pyrula.journal import pending
    from pyrula.runtime import fact_log

    if store.folder is None:
        return {"recordings": 0, "run_facts": 0}
    return {
        "recordings": sum(1 for _ in pending.read_waiting(store.folder)),
        "run_facts": sum(1 for _ in fact_log.read_logged(store.folder)),
    }


def _take_in_stopped_logs(source: str) -> str | None:
    """Put in a folder store's tables what its stopped processes left in their logs, as any
    process opening it to write does, so a copy of its tables holds it. Returns why that could
    not be done (a read-only source, a full disk), or None."""
    if is_url(source):
        return None
    with Store(source, create=False, readonly=True) as opened:
        if not any(_waiting(opened).values()):
            return None
    from pyrula.journal import pending
    from pyrula.journal.exchanges import Exchanges
    from pyrula.runtime import fact_log

    try:
        with Store(source, create=False) as opened:
            pending.recover(Exchanges(opened), again=True)
            fact_log.recover(opened)
    except PyrulaError as exc:
        return str(exc)
    return None


@store_app.command("stats")
def stats_command(
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Entries per table, the backend, its format and size, on either backend.

    Example: pyrula store stats --store postgresql://pyrula@db.internal/pyrula --json
    """
    try:
        with Store(store, create=False, readonly=True) as opened:
            found = opened.stat()
    except PyrulaError as exc:
        raise _fail(exc, as_json) from None
    if as_json:
        typer.echo(json.dumps(found))
        return
    size = f"{found['file_bytes']:,} bytes"
    typer.echo(f"{found['path']} ({found['backend']}, format {found['format']}, {size})")
    for name, count in found["entries"].items():
        typer.echo(f"  {name:<10} {count:>10,}")
