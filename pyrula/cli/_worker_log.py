"""How `pyrula worker` logs: one line per run event on stderr, as uvicorn's access log does.

The worker logs on the `pyrula.worker` logger; each record carries its structured fields as
`record.pyrula` (event, run, workflow, attempt, duration_ms, status, error). People get
`INFO:     run_… "workflow" attempt 1 completed in 0.012s`; `--json` prints one JSON object per
line for log shippers; `--quiet` keeps only warnings (draining, releasing, a lost lease).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

LOGGER = "pyrula.worker"


class PlainFormatter(logging.Formatter):
    """`LEVEL:    message`, the level padded as uvicorn pads it."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname + ':':<9} {record.getMessage()}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: `ts` (UTC, ISO 8601), then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        fields: dict[str, Any] = getattr(record, "pyrula", None) or {"event": "log"}
        line = {"ts": ts.replace("+00:00", "Z"), "level": record.levelname.lower(), **fields}
        if "run" not in fields:
            line["message"] = record.getMessage()
        return json.dumps(line, default=str)


def install(*, as_json: bool, quiet: bool) -> logging.Handler:
    """Send `pyrula.worker` records to stderr, in the chosen shape, and no further up."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if as_json else PlainFormatter())
    logger = logging.getLogger(LOGGER)
    for old in [
        h for h in logger.handlers if isinstance(h.formatter, PlainFormatter | JsonFormatter)
    ]:
        logger.removeHandler(old)  # a second `worker` command in one process replaces the first's
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    logger.propagate = False
    return handler


def say(event: str, message: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """A line of the worker command itself (started, stopped) in the same stream and shape."""
    extra = {"pyrula": {"event": event, **fields}}
    logging.getLogger(LOGGER).log(level, "%s", message, extra=extra)
