"""`pyrula journal ...`: inspect, diff, export, import and prune recorded exchanges.

Every command takes `--store PATH` (default: $PYRULA_STORE, else ./.pyrula) and `--json`. A failure
is one line on stderr (a JSON object with `--json`) and exit code 1.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from rich.console import Console

from pyrula.cli import _har, _jsonl, _render
from pyrula.cli._errors import BadExport, JournalCommandError
from pyrula.cli._options import JsonOption, StoreOption
from pyrula.cli._reporting import reported as _reported
from pyrula.cli.store import damage_json as _damage_json
from pyrula.cli.store import damage_text as _damage_text
from pyrula.inspection.compare import compare
from pyrula.inspection.reassemble import reassemble
from pyrula.inspection.records import (
    Entry,
    Loaded,
    Selection,
    load,
    load_readable,
    opened,
    resolve,
    select,
    select_readable,
)
from pyrula.journal.check import Damage
from pyrula.journal.exchanges import Exchanges

journal_app = typer.Typer(
    help="Inspect and manage recorded exchanges.", no_args_is_help=True, add_completion=False
)

PrefixArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="CASSETTE",
        help="Only cassettes whose name starts with this (a full name, or a prefix of names).",
        show_default=False,
    ),
]
SurfaceOption = Annotated[
    str | None,
    typer.Option("--surface", help="Only this surface (openai.chat, anthropic.messages, ...)."),
]


def _sorted(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.namespace, e.record.recorded_at, e.record.id))


# -- ls ----------------------------------------------------------------------------------------


@journal_app.command("ls")
def ls(
    prefix: PrefixArgument = None,
    surface: SurfaceOption = None,
    run: Annotated[
        str | None,
        typer.Option("--run", metavar="RUN", help="Only the model calls this run journaled."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List recorded exchanges, one row each.

    Example: pyrula journal ls tests/test_chat.py --surface openai.chat
    """
    with _reported(as_json), opened(store) as journal_store:
        exchanges = Exchanges(journal_store)
        entries = _sorted(select(exchanges, Selection(prefix, surface, run=run)))
    if as_json:
        _render.emit_json([_render.entry_json(e) for e in entries])
        return
    out = _render.console()
    if not entries:
        out.print("No recorded exchanges match.", style="dim")
        return
    out.print(_render.ls_table(entries, out.width))


# -- show --------------------------------------------------------------------------------------


@journal_app.command("show")
def show(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="An exchange id or its prefix.")],
    raw: Annotated[bool, typer.Option("--raw", help="Print the reply's frames as kept.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one exchange: its scrubbed request and its reply (a stream is reassembled to text).

    Example: pyrula journal show 3f9a0c1b
    """
    with _reported(as_json), opened(store) as journal_store:
        exchanges = Exchanges(journal_store)
        exchange = load(exchanges, resolve(exchanges, record_id))
    record = exchange.record
    stream = reassemble(record.surface, exchange.body) if record.streamed else None
    if as_json:
        _render.emit_json(_render.show_json(exchange, stream, raw=raw))
        return
    _render.show(_render.console(), exchange, stream, raw=raw)


# -- diff --------------------------------------------------------------------------------------


@journal_app.command("diff")
def diff(
    first: Annotated[str, typer.Argument(metavar="ID1", help="The first exchange (id prefix).")],
    second: Annotated[str, typer.Argument(metavar="ID2", help="The second exchange.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show how two recorded requests differ, and whether their replies are the same.

    Example: pyrula journal diff 3f9a0c1b 77d2e4a0
    """
    with _reported(as_json), opened(store) as journal_store:
        exchanges = Exchanges(journal_store)
        a = load(exchanges, resolve(exchanges, first))
        b = load(exchanges, resolve(exchanges, second))
    result = compare(a, b)
    if as_json:
        _render.emit_json(result)
        return
    _render.diff_text(_render.console(), result)


# -- export / import ---------------------------------------------------------------------------


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    har = "har"


@journal_app.command("export")
def export(
    prefix: PrefixArgument = None,
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="jsonl (re-importable) or har.")
    ] = ExportFormat.jsonl,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    surface: SurfaceOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export exchanges as JSONL (one per line, re-importable) or as a HAR 1.2 archive.

    Damaged exchanges are left out and listed on stderr (exit code 1); the rest is exported.

    Example: pyrula journal export tests/ --format har -o recorded.har
    """
    damaged: list[Damage] = []
    with _reported(as_json), opened(store) as journal_store:
        exchanges = Exchanges(journal_store)
        entries = select_readable(exchanges, Selection(prefix, surface, copies=True), damaged)
        loaded = load_readable(exchanges, entries, damaged)
        if output is None:
            _write(sys.stdout, fmt, loaded)
            return
        part = output.with_name(output.name + ".part")
        try:
            with part.open("w", encoding="utf-8", newline="\n") as stream:
                _write(stream, fmt, loaded)
            os.replace(part, output)
        finally:
            part.unlink(missing_ok=True)
    exported = len(entries) - sum(d.record_id is not None for d in damaged)
    if as_json:
        _render.emit_json({"exported": exported, "format": fmt.value, "output": str(output)})
    else:
        _render.console().print(
            f"Exported {exported} exchanges to {output} ({fmt.value}).",
            markup=False,
            soft_wrap=True,
        )
    _report_damage(damaged, as_json)


def _report_damage(damaged: list[Damage], as_json: bool) -> None:
    """List the exchanges an export left out because they did not read; exit 1 if any."""
    if not damaged:
        return
    for item in damaged:
        if as_json:
            typer.echo(json.dumps(_damage_json(item)), err=True)
        else:
            typer.echo(f"damaged, not exported: {_damage_text(item)}", err=True)
    typer.echo(
        f"{len(damaged)} damaged exchange(s) left out; `pyrula store check` lists the damage",
        err=True,
    )
    raise typer.Exit(1)


def _write(stream: TextIO, fmt: ExportFormat, loaded: Iterator[Loaded]) -> None:
    if fmt is ExportFormat.har:
        stream.write(json.dumps(_har.har_log(loaded), indent=2, ensure_ascii=True) + "\n")
        return
    for exchange in loaded:  # one exchange in memory at a time
        stream.write(_jsonl.export_line(exchange) + "\n")


@journal_app.command("import")
def import_(
    file: Annotated[str, typer.Argument(metavar="FILE", help="A JSONL export, or - for stdin.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import a JSONL export: same keys, same ids, all or nothing. Creates the store if needed.

    Example: pyrula journal import recorded.jsonl --store ./ci-store
    """
    with _reported(as_json):
        try:
            if file == "-":
                incoming = _jsonl.parse(sys.stdin)
            else:
                with open(file, encoding="utf-8") as stream:
                    incoming = _jsonl.parse(stream)
        except UnicodeDecodeError as exc:
            raise BadExport(
                f"{file} is not UTF-8 text ({exc.reason}); is it a JSONL export?"
            ) from exc
        with opened(store, create=True) as target:
            result = _jsonl.write(target, incoming)
    if as_json:
        _render.emit_json(
            {"imported": result.written, "replaced": result.replaced, "store": str(target.location)}
        )
        return
    replaced = f" ({result.replaced} replaced an existing record)" if result.replaced else ""
    _render.console().print(
        f"Imported {result.written} exchanges into {target.location}{replaced}.",
        markup=False,
        soft_wrap=True,
    )


# -- prune -------------------------------------------------------------------------------------


@journal_app.command("prune")
def prune(
    prefix: PrefixArgument = None,
    older_than: Annotated[
        float | None,
        typer.Option("--older-than", min=0, metavar="DAYS", help="Only exchanges older than this."),
    ] = None,
    surface: SurfaceOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, delete nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    everything: Annotated[
        bool, typer.Option("--all", help="With no filter: really delete every exchange.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete matching exchanges, then the request blobs no exchange uses any more.

    Asks first unless --yes (or --json) is given; with neither a filter nor a question asked,
    deleting the whole store also needs --all.

    Example: pyrula journal prune --older-than 30
    """
    with _reported(as_json):
        unfiltered = prefix is None and surface is None and older_than is None
        if unfiltered and (yes or as_json) and not (everything or dry_run):
            raise JournalCommandError(
                "no filter given, so this would delete every recorded exchange in the store; "
                "pass --all to mean that, or filter with PREFIX, --surface or --older-than"
            )
    with _reported(as_json), opened(store) as journal_store:
        exchanges = Exchanges(journal_store)
        entries = _sorted(select(exchanges, Selection(prefix, surface, older_than, copies=True)))
        report: dict[str, Any] = {
            "matched": len(entries),
            "deleted": 0,
            "blobs_deleted": 0,
            "dry_run": dry_run,
            "ids": [e.record.id for e in entries],
        }
        out = _render.console()
        if not entries or dry_run:
            if as_json:
                _render.emit_json(report)
            elif not entries:
                out.print("No recorded exchanges match; nothing to prune.")
            else:
                out.print(_render.ls_table(entries, out.width))
                out.print(f"{len(entries)} exchanges would be deleted (dry run: nothing was).")
            return
        if not (yes or as_json or _confirmed(out, entries)):
            out.print("Nothing deleted.")
            return
        report["deleted"] = exchanges.delete(e.key for e in entries)
        report["blobs_deleted"] = exchanges.collect_garbage()
    if as_json:
        _render.emit_json(report)
        return
    out.print(
        f"Deleted {report['deleted']} exchanges and {report['blobs_deleted']} request blobs "
        "no other exchange used."
    )


def _confirmed(out: Console, entries: list[Entry]) -> bool:
    cassettes = len({e.namespace for e in entries})
    out.print(_render.ls_table(entries, out.width))
    question = (
        f"Delete these {len(entries)} exchanges from {cassettes} cassette{'s' * (cassettes != 1)}?"
    )
    try:
        return typer.confirm(question, default=False)
    except typer.Abort:
        raise JournalCommandError("no answer to the confirmation; pass --yes to prune") from None


# -- stats -------------------------------------------------------------------------------------


@journal_app.command("stats")
def stats(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Count exchanges per cassette and surface; total frames, bytes, blobs and file size.

    Example: pyrula journal stats --json
    """
    with _reported(as_json), opened(store) as journal_store:
        entries = select(Exchanges(journal_store))
        store_stat = journal_store.stat()
    result = {
        "path": store_stat["path"],
        "file_bytes": store_stat["file_bytes"],
        "map_size": store_stat["map_size"],
        "format": store_stat["format"],
        "exchanges": len(entries),
        "streamed": sum(e.record.streamed for e in entries),
        "frames": sum(e.record.frames for e in entries),
        "bytes": sum(e.record.size for e in entries),
        "blobs": store_stat["entries"].get("blobs", 0),
        "frame_pages": store_stat["entries"].get("frames", 0),
        "namespaces": _tally(entries, lambda e: e.namespace),
        "surfaces": _tally(entries, lambda e: e.record.surface),
    }
    if as_json:
        _render.emit_json(result)
        return
    _render.stats_text(_render.console(), result)


def _tally(entries: list[Entry], group: Callable[[Entry], str]) -> dict[str, dict[str, int]]:
    tally: dict[str, dict[str, int]] = {}
    for entry in entries:
        counts = tally.setdefault(group(entry), {"exchanges": 0, "bytes": 0})
        counts["exchanges"] += 1
        counts["bytes"] += entry.record.size
    return dict(sorted(tally.items()))
