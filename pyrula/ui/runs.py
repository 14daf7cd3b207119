"""The run pages: the list, one run's timeline (live while it runs), and its action buttons.

The buttons call the same functions as `pyrula runs answer | cancel | resume | fork`, so they
make the same checks and refuse with the same messages.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pyrula.errors import PyrulaError
from pyrula.inspection.runs import (
    against_caps,
    answer_value,
    attempts,
    finished,
    pending_question,
    spend_of,
    waiting,
)
from pyrula.runtime import RunRecord, RunStore, answer, cancel, fork, resume
from pyrula.ui.templating import templates

PAGE_SIZE = 50
SCAN_BUDGET = 5000
TIMELINE_EVENTS = 2000  # a longer journal pages on with `after`


def _runs(request: Request) -> RunStore:
    found: RunStore = request.app.state.runs
    return found


def run_list(request: Request) -> Response:
    params = request.query_params
    status = params.get("status", "").strip()
    workflow = params.get("workflow", "").strip()
    after = params.get("after") or None
    journal = _runs(request)
    rows: list[dict[str, Any]] = []
    last: str | None = None
    scanned = 0
    now = time.time()
    for run in journal.runs(after=after):
        scanned += 1
        last = run.id
        if (not status or run.status == status) and (not workflow or workflow in run.name):
            spend = spend_of(journal.events(run.id, limit=TIMELINE_EVENTS))
            caps = against_caps(run, spend)
            rows.append({"run": run, "spend": spend, "caps": caps, "waiting": waiting(run, now)})
            if len(rows) >= PAGE_SIZE:
                break
        if scanned >= SCAN_BUDGET:
            break
    else:
        last = None
    next_params = {k: v for k, v in (("status", status), ("workflow", workflow)) if v}
    if last is not None:
        next_params["after"] = last
    return templates.TemplateResponse(
        request,
        "runs.html",
        {
            "rows": rows,
            "filters": {"status": status, "workflow": workflow},
            "next_params": next_params if last is not None else None,
            "first_page": after is None,
            "scanned": scanned,
        },
    )


def timeline_context(request: Request, record: RunRecord) -> dict[str, Any]:
    """What `timeline.html` shows of `record` (from event `after` of the request, if given)."""
    journal = _runs(request)
    after = int(request.query_params.get("after") or 0)
    events = journal.events(record.id, after=after, limit=TIMELINE_EVENTS)
    pending = pending_question(record, events)
    spend = spend_of(events)
    last_seq = events[-1].seq if events else after
    return {
        # What the page shows, in one word: the live stream renders again when it moves.
        "state": f"{record.status}:{record.attempt}:{record.updated_at!r}:{last_seq}",
        "run": record,
        "attempts": attempts(events),
        "spend": spend,
        "caps": against_caps(record, spend),
        "against_caps": against_caps,
        "waiting": waiting(record, time.time()),
        "pending": pending,
        # Follow the run while it can move on its own (`pyrula.ui.live`); a question waiting
        # for a person is not refreshed under the person typing the answer.
        "live": not finished(record) and pending is None,
        "more": events[-1].seq if len(events) >= TIMELINE_EVENTS else None,
        "after": after,
        "error": None,
    }


def run_detail(request: Request, error: str | None = None, status_code: int = 200) -> Response:
    try:
        record = _runs(request).get(request.path_params["run_id"])
    except PyrulaError as exc:
        return templates.TemplateResponse(
            request, "message.html", {"title": "No such run", "message": str(exc)}, status_code=404
        )
    context = timeline_context(request, record)
    context["error"] = error
    return templates.TemplateResponse(request, "run.html", context, status_code=status_code)


async def run_action(request: Request) -> Response:
    """A button: answer, cancel, resume or fork, through the runtime's own functions."""
    run_id = request.path_params["run_id"]
    action = request.path_params["action"]
    form = await request.form()
    store = request.app.state.store
    try:
        if action == "answer":
            answer(run_id, answer_value(str(form.get("value", ""))), store=store)
        elif action == "cancel":
            cancel(run_id, store=store)
        elif action == "resume":
            resume(run_id, store=store)
        elif action == "fork":
            handle = fork(run_id, int(str(form.get("at", "0"))), store=store)
            return RedirectResponse(f"/runs/{handle.id}", status_code=303)
        else:
            return Response(f"unknown action {action!r}", status_code=404)
    except (PyrulaError, ValueError) as exc:
        return run_detail(request, error=str(exc), status_code=409)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


routes = [
    Route("/runs", run_list),
    Route("/runs/{run_id}", run_detail),
    Route("/runs/{run_id}/{action}", run_action, methods=["POST"]),
]
