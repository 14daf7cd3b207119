"""The exchange pages: the filtered list, one exchange, two recordings side by side."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pyrula.errors import PyrulaError
from pyrula.fingerprints import provider_of
from pyrula.inspection.by_time import Cursor, TimeOrder
from pyrula.inspection.compare import compare
from pyrula.inspection.pages import Query, newest_first, page
from pyrula.inspection.reassemble import reassemble
from pyrula.inspection.records import Entry, Loaded, load
from pyrula.inspection.usage import usage_and_cost
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import run_of
from pyrula.ui.conversation import tool_names, turns
from pyrula.ui.templating import templates

FILTERS = ("cassette", "run", "surface", "status", "model", "text", "since", "until")


def _exchanges(request: Request) -> Exchanges:
    found: Exchanges = request.app.state.exchanges
    return found


def _when(text: str | None) -> float | None:
    """A time filter: an ISO date or date-time (local time), or Unix seconds."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).astimezone().timestamp()
    except ValueError:
        return None


def query_of(request: Request) -> Query:
    params = request.query_params

    def get(name: str) -> str | None:
        value = params.get(name, "").strip()
        return value or None

    return Query(
        cassette=get("cassette"),
        run=get("run"),
        surface=get("surface"),
        status=get("status"),
        model=get("model"),
        text=get("text"),
        since=_when(get("since")),
        until=_when(get("until")),
    )


def exchange_list(request: Request) -> Response:
    query = query_of(request)
    params = request.query_params
    after, before = Cursor.parse(params.get("after")), Cursor.parse(params.get("before"))
    found = newest_first(_order(request), query, after=after, before=before)
    filters = {name: params.get(name, "") for name in FILTERS}
    kept = {k: v for k, v in filters.items() if v}
    live = {**kept, "since": f"{_order(request).token}:{found.arrived}"}
    return templates.TemplateResponse(
        request,
        "exchanges.html",
        {
            "page": found,
            "rows": rows_of(found.entries, found.models),
            "filters": filters,
            "next_params": {**kept, "after": found.older.text()} if found.older else None,
            "previous_params": {**kept, "before": found.newer.text()} if found.newer else None,
            "first_page": found.newer is None,
            "kept": kept,
            # Only the first page takes new rows at its top (a later page would not show them).
            "live": f"/live/exchanges?{urlencode(live)}" if found.newer is None else None,
        },
    )


def _order(request: Request) -> TimeOrder:
    found: TimeOrder = request.app.state.order
    return found


def rows_of(entries: list[Entry], models: dict[str, str]) -> list[dict[str, Any]]:
    return [_row(entry, models.get(entry.record.id, "")) for entry in entries]


def _row(entry: Entry, model: str) -> dict[str, Any]:
    record = entry.record
    provider = provider_of(record.url)
    return {
        "key": entry.key.hex(),
        "record": record,
        "run": run_of(entry.key),
        "surface": f"{record.surface} ({provider})" if provider else record.surface,
        "model": model,
        "path": record.url.split("://", 1)[-1].partition("/")[2],
    }


def _load_key(request: Request, key_hex: str) -> Loaded | None:
    try:
        key = bytes.fromhex(key_hex)
    except ValueError:
        return None
    exchanges = _exchanges(request)
    found = exchanges.get(key)
    if found is None:
        return None
    return load(exchanges, Entry(key, found[0]))


def _missing(request: Request, what: str) -> Response:
    return templates.TemplateResponse(
        request, "message.html", {"title": "Not found", "message": what}, status_code=404
    )


def exchange_detail(request: Request) -> Response:
    exchange = _load_key(request, request.path_params["key"])
    if exchange is None:
        return _missing(request, "No exchange under that key: it was pruned, or the link is old.")
    record = exchange.record
    body = exchange.body
    stream = reassemble(record.surface, body) if record.streamed else None
    compared = exchange.request.get("compared") or {}
    meta = exchange.request.get("meta") or {}
    usage, cost = usage_and_cost(record.surface, body, record.streamed, meta)
    frame_ms = record.extra.get("frame_ms") or []
    return templates.TemplateResponse(
        request,
        "exchange.html",
        {
            "key": exchange.key.hex(),
            "record": record,
            "document": exchange.request,
            "turns": turns(compared),
            "tools": tool_names(compared),
            "meta": meta,
            "stream": stream,
            "events": _timed(stream.events, frame_ms) if stream is not None else [],
            "body": _readable(body),
            "usage": usage,
            "cost": cost,
        },
    )


def _readable(body: bytes) -> str:
    """A reply body as text: indented when it is JSON, as recorded otherwise."""
    text = body.decode("utf-8", "replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _timed(events: list[Any], frame_ms: list[float]) -> list[tuple[Any, float | None]]:
    """Each event with the time its frame arrived (ms after the request), when recorded."""
    return [(event, frame_ms[i] if i < len(frame_ms) else None) for i, event in enumerate(events)]


def exchange_by_id(request: Request) -> Response:
    """An exchange named by its id (as `llm:done` names it), looked up under the run's keys when
    the link says which run, else through the whole store."""
    wanted = request.path_params["record_id"].lower()
    query = Query(run=request.query_params.get("run") or None)
    after: bytes | None = None
    exchanges = _exchanges(request)
    while True:
        found = page(exchanges, query, after=after, limit=10_000, budget=10_000)
        for entry in found.entries:
            if entry.record.id.startswith(wanted):
                return RedirectResponse(f"/exchange/{entry.key.hex()}", status_code=303)
        if found.after is None:
            return _missing(request, f"No exchange has an id starting with {wanted!r}.")
        after = found.after


def exchange_diff(request: Request) -> Response:
    keys = request.query_params.getlist("key")
    if len(keys) != 2:
        return templates.TemplateResponse(
            request,
            "message.html",
            {"title": "Pick two", "message": "Tick exactly two exchanges in the list to diff."},
            status_code=400,
        )
    a, b = (_load_key(request, key) for key in keys)
    if a is None or b is None:
        return _missing(request, "One of the two exchanges is no longer in the store.")
    try:
        result = compare(a, b)
    except PyrulaError as exc:
        return _missing(request, str(exc))
    return templates.TemplateResponse(
        request, "diff.html", {"result": result, "keys": keys, "a": a, "b": b}
    )


routes = [
    Route("/exchanges", exchange_list),
    Route("/exchange/{key}", exchange_detail),
    Route("/exchanges/id/{record_id}", exchange_by_id),
    Route("/diff", exchange_diff),
]
