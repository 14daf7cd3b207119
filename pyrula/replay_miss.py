"""What a cassette's replay miss tells the user: the request it could not replay, the nearest
recording of the same surface and how the two differ, and what to do about it."""

from __future__ import annotations

import time

from pyrula.errors import ReplayMiss
from pyrula.fingerprints import Canonical, RequestParts, nearest
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import cassette_key, namespace_prefix, split_key


def explain_miss(
    exchanges: Exchanges,
    name: str,
    parts: RequestParts,
    canonical: Canonical,
    occurrence: int,
    fixes: tuple[str, str, str],
) -> ReplayMiss:
    """The miss of cassette `name`, whose recordings `exchanges` holds, on this request (its
    `occurrence`-th with this fingerprint). `fixes`: what to do for a call more than was
    recorded, for a cassette that holds nothing, and for a changed request."""
    repeat_fix, unrecorded_fix, fix = fixes
    where = f"{canonical.surface} {parts.method} {parts.url.split('?')[0]}"
    if occurrence and exchanges.get(cassette_key(name, canonical.digest, 0)):
        return ReplayMiss(
            f"cassette {name!r} recorded this {where} request {occurrence} time(s); "
            f"this is call {occurrence + 1}. {repeat_fix}"
        )
    recorded = list(exchanges.scan(namespace_prefix(name)))
    candidates = (
        ((key, record), exchanges.request(record).get("compared", {}))
        for key, record in recorded
        if record.surface == canonical.surface
    )
    best = nearest(canonical.compared, candidates)
    if not recorded:
        return ReplayMiss(
            f"cassette {name!r} is empty: this {where} request was never recorded. {unrecorded_fix}"
        )
    if best is None:
        return ReplayMiss(f"cassette {name!r} has no recorded {where} request. {fix}")
    (key, record), differences = best
    age = _age(record.recorded_at)
    lines = "\n".join(f"  - {d}" for d in differences)
    return ReplayMiss(
        f"cassette {name!r} has no recording of this {where} request.\n"
        f"The nearest recorded one ({_named(key)}, recorded {age}) differs in:\n"
        f"{lines}\n{fix}",
        nearest=record.id,
        diffs=differences,
    )


def _named(key: bytes) -> str:
    """How a person finds the recording under `key` in its cassette: its fingerprint's first 12
    hex digits, as a text cassette's entry holds it whole, and its occurrence past the first
    (not the record's id: that is its cache's, which a text cassette's file does not hold)."""
    _name, fingerprint, occurrence = split_key(key)
    found = f"fingerprint {fingerprint[:12]}"
    return f"{found}, occurrence {occurrence}" if occurrence else found


def _age(timestamp: float) -> str:
    seconds = max(0.0, time.time() - timestamp)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


__all__ = ["explain_miss"]
