"""Reading provider JSON defensively: a malformed reply is data to skip, never an exception."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def parse_json(data: str | bytes) -> Any:
    """The JSON value in `data`, or None for anything that is not (or nests past the parser)."""
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def number(value: Any) -> int:
    """A token count as reported (floats truncated); 0 when absent or not a number."""
    return int(value) if isinstance(value, int | float) else 0


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def index(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
