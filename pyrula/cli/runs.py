"""`pyrula runs ...` and `pyrula worker`: look at durable runs and drive them."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.table import Table

from pyrula.cli._options import JsonOption, StoreOption
from pyrula.cli._render import console, emit_json, local_time
from pyrula.cli._reporting import reported as _reported
from pyrula.inspection.runs import against_caps, answer_value, spend_of, waiting
from pyrula.journal.store import Store
from pyrula.runtime import Event, RunStore, answer, cancel, fork, purge, resume
from pyrula.runtime.retention import parse_duration

runs_app = typer.Typer(help="Inspect and drive durable runs.", no_args_is_help=True)


def _journal(store: str | None) -> RunStore:
    return RunStore(Store(store, create=False))


@runs_app.command("ls")
def ls(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List runs, newest first."""
    with _reported(as_json):
        runs = sorted(_journal(store).runs(), key=lambda r: r.created_at, reverse=True)
        now = time.time()
        if as_json:
            emit_json([{**r.to_json(), "waiting": waiting(r, now)} for r in runs])
            return
        table = Table("run", "name", "status", "attempt", "created", "updated", "", box=None)
        for run in runs:
            table.add_row(
                run.id,
                run.name,
                run.status,
                str(run.attempt),
                local_time(run.created_at),
                local_time(run.updated_at),
                waiting(run, now) or "",
            )
        console().print(table if runs else "No runs in this store.")


@runs_app.command("show")
def show(run_id: str, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """A run's record and its journal of events."""
    with _reported(as_json):
        journal = _journal(store)
        record = journal.get(run_id)
        events = journal.events(run_id)
        if as_json:
            emit_json({"run": record.to_json(), "events": [e.to_json() for e in events]})
            return
        out = console()
        out.print(
            f"[bold]{record.id}[/] {record.name} — {record.status} (attempt {record.attempt})"
        )
        why = waiting(record, time.time())
        if why:
            out.print(why)
        for use in against_caps(record, spend_of(events)):
            out.print(f"{use.name}: spent {use.text}")
        if record.error:
            out.print(f"error: {record.error.get('type')}: {record.error.get('message', '')}")
        table = Table("seq", "event", "detail", box=None)
        for event in events:
            table.add_row(str(event.seq), event.type, _detail(event.payload))
        out.print(table)
        calls = [e for e in events if e.type == "llm:done"]
        if calls:
            out.print(_model_calls(calls))


def _model_calls(calls: list[Event]) -> Table:
    """One row per metered model call; `exchange` is the id `pyrula journal show` takes."""
    table = Table("model call", "model", "tokens", "cost", "exchange", box=None, title=None)
    for event in calls:
        payload = event.payload
        where = payload.get("position") or (
            f"{payload.get('step_id')} #{payload.get('call_index')} ({payload.get('within')})"
        )
        cost = payload.get("cost_usd")
        tokens = str(payload.get("total_tokens", ""))
        table.add_row(
            str(where),
            str(payload.get("model") or ""),
            tokens + (" (estimated)" if payload.get("estimated") else ""),
            "" if cost is None else f"${cost:.6f}",
            str(payload.get("exchange") or "-")[:12],
        )
    return table


def _detail(payload: dict[str, Any]) -> str:
    shown = {k: v for k, v in payload.items() if v not in (None, "", [], {})}
    text = json.dumps(shown, default=str)
    return text if len(text) <= 100 else text[:97] + "..."


@runs_app.command("cancel")
def cancel_run(run_id: str, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Ask a run to stop at its next boundary."""
    with _reported(as_json):
        record = cancel(run_id, store=Store(store, create=False))
        _said(as_json, record.to_json(), f"cancel requested for {run_id} ({record.status})")


@runs_app.command("resume")
def resume_run(run_id: str, store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Queue a parked run now, or a failed one again."""
    with _reported(as_json):
        record = resume(run_id, store=Store(store, create=False))
        _said(as_json, record.to_json(), f"{run_id} queued ({record.status})")


@runs_app.command("answer")
def answer_run(
    run_id: str,
    value: Annotated[str, typer.Argument(help="The answer; parsed as JSON when it is JSON.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer the question a parked run asked with ctx.interrupt()."""
    with _reported(as_json):
        event = answer(run_id, answer_value(value), store=Store(store, create=False))
        _said(as_json, event.to_json(), f"answered {event.payload['id']} of {run_id}")


@runs_app.command("fork")
def fork_run(
    run_id: str,
    at: Annotated[int, typer.Option("--at", help="Replay up to this event seq, then go live.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a what-if run that replays RUN_ID up to an event and goes live from there."""
    with _reported(as_json):
        handle = fork(run_id, at, store=Store(store, create=False))
        _said(as_json, {"run": handle.id}, f"forked {run_id} at event {at} as {handle.id}")


@runs_app.command("purge")
def purge_runs(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Purge runs that ended longer ago than this: 30d, 12h, 90m, 45s, 2w.",
        ),
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List, delete nothing.")] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete ended runs (completed, failed, cancelled, over budget) older than DURATION, with
    everything they hold, and expired idempotency tokens. Queued, running and parked runs are
    never touched.

    Example: pyrula runs purge --older-than 30d --dry-run
    """
    with _reported(as_json):
        try:
            seconds = parse_duration(older_than)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--older-than") from None
        purged = purge(seconds, store=Store(store, create=False), dry_run=dry_run)
        if as_json:
            emit_json(purged.to_json())
            return
        verb = "would purge" if dry_run else "purged"
        for run in purged.runs:
            console().print(
                f"{verb} {run.id}  {run.name}  {run.status}  ended {local_time(run.updated_at)}"
            )
        tokens = "" if dry_run else f", {purged.tokens} expired idempotency token(s)"
        console().print(
            f"{verb} {len(purged.runs)} run(s) that ended over {older_than} ago{tokens}"
        )


def _said(as_json: bool, data: dict[str, Any], text: str) -> None:
    if as_json:
        emit_json(data)
    else:
        console().print(text)
