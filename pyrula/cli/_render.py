"""How `pyrula journal` prints: rich tables and panels for people, plain JSON for programs.

Recorded text (bodies, requests, events) is always printed as `Text`, never as markup, so a
reply that happens to contain `[bold]` prints as it was recorded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import typer
from rich.console import Console, JustifyMethod
from rich.highlighter import JSONHighlighter
from rich.table import Table
from rich.text import Text

from pyrula.fingerprints import provider_of
from pyrula.inspection.reassemble import Reassembled
from pyrula.inspection.records import Entry, Loaded
from pyrula.journal.exchanges import ExchangeRecord
from pyrula.journal.keys import run_of
from pyrula.journal.text import frame_json

# Piped output is not cut to 80 columns: rows stay whole for grep and friends.
_PIPE_WIDTH = 200


def console(*, stderr: bool = False) -> Console:
    out = Console(stderr=stderr, highlight=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = _PIPE_WIDTH
    return out


def emit_json(value: Any) -> None:
    """Machine-readable output: one JSON document on stdout (ASCII, so any bytes survive)."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=True))


def human_size(size: int) -> str:
    amount = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    raise AssertionError("unreachable")


def local_time(timestamp: float, *, seconds: bool = False) -> str:
    shape = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return datetime.fromtimestamp(timestamp).astimezone().strftime(shape)


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="milliseconds")


def request_line(method: str, url: str) -> str:
    parts = urlsplit(url)
    return f"{method} {parts.path}" + (f"?{parts.query}" if parts.query else "")


def recorded(text: str, style: str = "") -> Text:
    """Recorded text as printable text: a lone surrogate (valid in JSON) shows as its escape."""
    return Text(text.encode("utf-8", "backslashreplace").decode("utf-8"), style=style)


def _json_view(value: Any) -> Text:
    """Pretty, highlighted JSON (rich's `JSON` would re-encode a lone surrogate and fail)."""
    text = JSONHighlighter()(recorded(json.dumps(value, indent=2, ensure_ascii=False)))
    text.no_wrap = True
    return text


def _status_style(status: int) -> str:
    return "green" if status < 300 else "yellow" if status < 400 else "red"


def _status(status: int) -> Text:
    return Text(str(status), style=_status_style(status))


# -- ls -----------------------------------------------------------------------------------------


def surface_label(record: ExchangeRecord) -> str:
    """The surface, and the OpenAI-compatible provider that served it when there is one
    (`openai.chat (groq)`): the name the fingerprint kept in `meta["provider"]`."""
    provider = provider_of(record.url)
    return f"{record.surface} ({provider})" if provider else record.surface


def entry_json(entry: Entry) -> dict[str, Any]:
    record = entry.record
    return {
        "id": record.id,
        "key": entry.key.hex(),
        "namespace": record.namespace,
        "run": run_of(entry.key),
        "occurrence": entry.occurrence,
        "surface": record.surface,
        "provider": provider_of(record.url),
        "fingerprint": record.fingerprint,
        "method": record.method,
        "url": record.url,
        "status": record.status,
        "streamed": record.streamed,
        "frames": record.frames,
        "size": record.size,
        "recorded_at": record.recorded_at,
        "recorded_at_iso": iso_time(record.recorded_at),
        "elapsed_ms": record.elapsed_ms,
    }


@dataclass(frozen=True, slots=True)
class _Column:
    """One column of `ls`. A flexible column gives way when the row is too wide, losing the
    start of its text after `keep` characters (a cassette name says most at its end)."""

    header: str
    cell: Callable[[ExchangeRecord], str]
    narrow: bool = True  # shown on terminals narrower than _WIDE
    wide: bool = True  # shown on the others
    flexible: bool = False
    where: bool = False  # the cassette, or the run that journaled the exchange (`_where`)
    keep: Callable[[ExchangeRecord], int] = lambda record: 0
    justify: JustifyMethod = "left"
    style: Callable[[ExchangeRecord], str] = lambda record: ""


_LS_COLUMNS: tuple[_Column, ...] = (
    _Column("id", lambda r: r.id[:12], style=lambda r: "cyan"),
    _Column("cassette/run", lambda r: r.namespace, where=True, flexible=True),
    _Column("surface", surface_label),
    _Column(
        "request",
        lambda r: request_line(r.method, r.url),
        narrow=False,
        flexible=True,
        keep=lambda r: len(r.method) + 1,
    ),
    _Column(
        "status", lambda r: str(r.status), justify="right", style=lambda r: _status_style(r.status)
    ),
    _Column("stream", lambda r: "yes" if r.streamed else ""),
    _Column("frames", lambda r: str(r.frames), narrow=False, justify="right"),
    _Column("size", lambda r: human_size(r.size), justify="right"),
    _Column("recorded", lambda r: local_time(r.recorded_at), narrow=False),
    _Column("recorded", lambda r: local_time(r.recorded_at)[5:], wide=False),  # no year
    _Column("ms", lambda r: f"{r.elapsed_ms:.0f}", narrow=False, justify="right"),
)
# Below this many columns `ls` leaves out request, frames, elapsed time and the year (--json
# has them all).
_WIDE = 110
_MIN_FLEXIBLE = 10


def ls_table(entries: Iterable[Entry], width: int) -> Table:
    """One line per exchange, fitted to `width` without wrapping."""
    columns = [c for c in _LS_COLUMNS if (c.wide if width >= _WIDE else c.narrow)]
    entries = list(entries)
    records = [entry.record for entry in entries]
    cells = [[recorded(_cell(c, e), c.style(e.record)) for c in columns] for e in entries]
    natural = [
        max([len(c.header), *(row[i].cell_len for row in cells)]) for i, c in enumerate(columns)
    ]
    flexible = [i for i, c in enumerate(columns) if c.flexible]
    # What the fixed columns and the gaps between columns leave for the flexible ones.
    room = (
        width - 2 * (len(columns) - 1) - sum(w for i, w in enumerate(natural) if i not in flexible)
    )
    widths = dict(enumerate(natural))
    for done, i in enumerate(sorted(flexible, key=natural.__getitem__)):
        share = room // (len(flexible) - done)
        widths[i] = min(natural[i], max(share, _MIN_FLEXIBLE))
        room -= widths[i]
    table = Table(box=None, header_style="bold", pad_edge=False)
    for i, column in enumerate(columns):
        table.add_column(column.header, no_wrap=True, width=widths[i], justify=column.justify)
    for record, row in zip(records, cells, strict=True):
        for i in flexible:
            row[i] = _cut(row[i], widths[i], columns[i].keep(record))
        table.add_row(*row)
    return table


def _cell(column: _Column, entry: Entry) -> str:
    if column.where:
        run = run_of(entry.key)  # a run's model calls have no cassette: name the run
        return run if run is not None else entry.record.namespace
    return column.cell(entry.record)


def _cut(text: Text, width: int, keep: int) -> Text:
    """`text` in `width` cells: its first `keep` characters, an ellipsis, then its end."""
    plain = text.plain
    if len(plain) <= width:
        return text
    keep = keep if keep + 2 <= width else 0
    return Text(plain[:keep] + "…" + plain[len(plain) - (width - keep - 1) :])


# -- show ---------------------------------------------------------------------------------------


def show_json(exchange: Loaded, stream: Reassembled | None, *, raw: bool) -> dict[str, Any]:
    record = exchange.record
    reply: dict[str, Any] = {
        "status": record.status,
        "headers": [list(pair) for pair in record.headers],
        "streamed": record.streamed,
        "body": frame_json(exchange.body),
    }
    if stream is not None:
        reply["text"] = stream.text
        reply["events"] = [{"event": e.event, "data": e.data} for e in stream.events]
    if raw:
        reply["frames"] = [frame_json(f) for f in exchange.frames]
    return {
        "id": record.id,
        "key": exchange.key.hex(),
        "record": record.to_json(),
        "request": exchange.request,
        "reply": reply,
    }


def show(out: Console, exchange: Loaded, stream: Reassembled | None, *, raw: bool) -> None:
    record = exchange.record
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("id", record.id)
    facts.add_row("cassette", Text(record.namespace or "-"))
    facts.add_row("surface", surface_label(record))
    facts.add_row("request", recorded(f"{record.method} {record.url}"))
    facts.add_row(
        "recorded", f"{local_time(record.recorded_at, seconds=True)} ({record.elapsed_ms:.1f} ms)"
    )
    reply = Text.assemble(_status(record.status), f" {_reason(record.status)}".rstrip())
    reply.append(
        f" · {'streamed, ' if record.streamed else ''}{record.frames} frame"
        f"{'s' * (record.frames != 1)}, {human_size(record.size)}"
    )
    facts.add_row("reply", reply)
    out.print(facts)

    out.rule("Request (scrubbed, canonical)", align="left")
    out.print(_json_view(exchange.request), soft_wrap=True)

    out.rule("Reply headers", align="left")
    for name, value in record.headers:
        out.print(Text.assemble((name, "bold"), ": ", recorded(value)), soft_wrap=True)

    if raw:
        out.rule("Reply frames (raw)", align="left")
        for number, frame in enumerate(exchange.frames):
            encoded = frame_json(frame)
            kind = "text" if "text" in encoded else "base64"
            out.print(Text(f"-- frame {number}: {len(frame)} bytes ({kind})", style="dim"))
            out.print(recorded(next(iter(encoded.values()))), soft_wrap=True)
        return

    if stream is not None:
        if stream.text is not None:
            out.rule(f"Reply text (reassembled from {len(stream.events)} events)", align="left")
            out.print(recorded(stream.text), soft_wrap=True)
            return
        out.rule(f"Reply events ({len(stream.events)})", align="left")
        for event in stream.events:
            out.print(
                Text.assemble((event.event, "bold"), ": ", recorded(event.data)), soft_wrap=True
            )
        return

    out.rule("Reply body", align="left")
    _print_body(out, exchange.body)


def _print_body(out: Console, body: bytes) -> None:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        out.print(
            Text(f"({len(body)} bytes that are not UTF-8 text; --raw prints them base64-encoded)"),
            style="dim",
        )
        return
    try:
        parsed = json.loads(text)
    except ValueError:
        out.print(recorded(text), soft_wrap=True)
        return
    out.print(_json_view(parsed), soft_wrap=True)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


# -- diff ---------------------------------------------------------------------------------------


def diff_text(out: Console, result: dict[str, Any]) -> None:
    a, b = result["a"], result["b"]
    out.print(
        Text.assemble(
            ("a ", "bold"), (a["id"][:12], "cyan"), f"  {a['surface']}  ", Text(a["namespace"])
        )
    )
    out.print(
        Text.assemble(
            ("b ", "bold"), (b["id"][:12], "cyan"), f"  {b['surface']}  ", Text(b["namespace"])
        )
    )
    for line in result["request"]:
        out.print(recorded(f"  - {line}"), soft_wrap=True)
    out.rule("Compared fields (decide which recording replays)", align="left")
    if result["compared"]:
        for line in result["compared"]:
            out.print(recorded(f"  - {line}", style="yellow"), soft_wrap=True)
    elif result["same_fingerprint"]:
        out.print("  none: both requests have the same fingerprint")
    else:
        out.print("  none")
    out.rule("Other fields (kept, not compared)", align="left")
    for line in result["meta"]:
        out.print(recorded(f"  - {line}"), soft_wrap=True)
    if not result["meta"]:
        out.print("  none")
    out.rule("Replies", align="left")
    if result["status"][0] != result["status"][1]:
        out.print(f"  status {result['status'][0]} -> {result['status'][1]}")
    if result["reply_bodies_equal"]:
        out.print(Text("  reply bodies are equal", style="green"))
    else:
        sizes = result["reply_sizes"]
        out.print(Text(f"  reply bodies differ ({sizes[0]} vs {sizes[1]} bytes)", style="red"))


# -- stats --------------------------------------------------------------------------------------


def stats_text(out: Console, stats: dict[str, Any]) -> None:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(justify="right")
    facts.add_row("store", Text(stats["path"]))
    facts.add_row("file size", human_size(stats["file_bytes"]))
    facts.add_row("exchanges", str(stats["exchanges"]))
    facts.add_row("streamed", str(stats["streamed"]))
    facts.add_row("frames", str(stats["frames"]))
    facts.add_row("reply bytes", human_size(stats["bytes"]))
    facts.add_row("request blobs", str(stats["blobs"]))
    facts.add_row("frame pages", str(stats["frame_pages"]))
    out.print(facts)
    for title, key in (("cassette", "namespaces"), ("surface", "surfaces")):
        if not stats[key]:
            continue
        table = Table(box=None, header_style="bold", pad_edge=False)
        table.add_column(title, overflow="fold")
        table.add_column("exchanges", justify="right")
        table.add_column("size", justify="right")
        for name, counts in stats[key].items():
            table.add_row(Text(name or "-"), str(counts["exchanges"]), human_size(counts["bytes"]))
        out.print()
        out.print(table)
