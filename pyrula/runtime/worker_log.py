"""The worker's log: one line per run claimed, resumed, parked, ended or released, on
`pyrula.worker`, with its structured form in `record.pyrula` for JSON log handlers."""

from __future__ import annotations

import logging
import time
from typing import Any

from pyrula.errors import StoreFull, StoreUnavailable
from pyrula.runtime.records import BUDGET_EXCEEDED, FAILED, QUEUED, RUNNING, Lease, RunRecord

log = logging.getLogger("pyrula.worker")


def fields(event: str, **more: Any) -> dict[str, Any]:
    """The structured form of a worker log record (`record.pyrula`), for JSON log handlers."""
    return {"pyrula": {"event": event, **more}}


def store_down(exc: BaseException) -> StoreFull | StoreUnavailable | None:
    """The store's own failure behind `exc` (a full disk, a database out of reach for longer
    than its retry window), if any; an SDK may wrap it, as openai's APIConnectionError does."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, StoreFull | StoreUnavailable):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def log_store_down(run: RunRecord, lease: Lease, exc: StoreFull | StoreUnavailable) -> None:
    event = "store_full" if isinstance(exc, StoreFull) else "store_unavailable"
    log.warning(
        "run %s attempt %s stopped: %s; the run is left to be resumed (by a worker once its "
        "lease lapses, or `pyrula runs resume`)",
        run.id,
        lease.attempt,
        exc,
        extra=fields(event, run=run.id, workflow=run.name, attempt=lease.attempt),
    )


def log_lost(run: RunRecord, lease: Lease) -> None:
    log.warning(
        "run %s attempt %s lost its lease",
        run.id,
        lease.attempt,
        extra=fields("lost", run=run.id, workflow=run.name, attempt=lease.attempt),
    )


# A run's status after each logged event: `claimed` and `resumed` start an attempt, `released`
# queues the run again; a run that ends over its budget is logged as failed.
_STATUS_AFTER = {"claimed": RUNNING, "resumed": RUNNING, "released": QUEUED}
_EVENT_FOR = {BUDGET_EXCEEDED: FAILED}


def log_run(
    status: str,
    run: RunRecord,
    lease: Lease,
    started: float | None = None,
    error: dict[str, Any] | None = None,
) -> None:
    """One line per run event, as an access log has one per request."""
    event = _EVENT_FOR.get(status, status)
    duration_ms = None if started is None else round((time.monotonic() - started) * 1000, 1)
    error_type = (error or {}).get("type")
    text = f'{run.id} "{run.name}" attempt {lease.attempt} {event}'
    if duration_ms is not None:
        text += f" in {duration_ms / 1000:.3f}s"
    if error_type:
        text += f" ({error_type})"
    structured = fields(
        event,
        run=run.id,
        workflow=run.name,
        attempt=lease.attempt,
        duration_ms=duration_ms,
        status=_STATUS_AFTER.get(status, status),
        error=error_type,
    )
    log.info("%s", text, extra=structured)
