"""Two recorded exchanges side by side: how their requests differ, and whether their replies do.

The differences are the replay-miss message's (`pyrula.fingerprints.diff`): one line per JSON
path of the compared fields, then the kept-but-uncompared ones.
"""

from __future__ import annotations

from typing import Any

from pyrula.fingerprints import diff as diff_compared
from pyrula.inspection.records import Loaded


def _side(exchange: Loaded) -> dict[str, Any]:
    record = exchange.record
    return {"id": record.id, "namespace": record.namespace, "surface": record.surface}


def compare(a: Loaded, b: Loaded) -> dict[str, Any]:
    """The differences from `a` to `b`, in the words of the replay-miss messages."""
    doc_a, doc_b = a.request, b.request
    request = [
        f"{name} changed ({doc_a.get(name)} -> {doc_b.get(name)})"
        for name in ("surface", "method", "url")
        if doc_a.get(name) != doc_b.get(name)
    ]
    return {
        "a": _side(a),
        "b": _side(b),
        "request": request,
        "same_fingerprint": a.record.fingerprint == b.record.fingerprint,
        "compared": diff_compared(doc_a.get("compared") or {}, doc_b.get("compared") or {}),
        "meta": diff_compared(doc_a.get("meta") or {}, doc_b.get("meta") or {}),
        "status": [a.record.status, b.record.status],
        "reply_bodies_equal": a.body == b.body,
        "reply_sizes": [a.record.size, b.record.size],
    }
