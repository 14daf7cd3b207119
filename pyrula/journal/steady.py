"""What two recordings of one reply differ in although the reply is the same: when it was
recorded, how long it took, and reply headers that change with every call (the date, the
serving machine, a request id, the quota left).

A text cassette re-recorded (`--pyrula-record-mode=all`) against a provider that answers as
before would otherwise change in these values only, a diff in review for nothing. So
`cassette_file.save` compares each new entry's `key` with that of the file's entry under the same
fingerprint and occurrence, and when they are equal keeps the file's entry verbatim (its old
timestamp and headers, which replay gives the SDK as before).
"""

from __future__ import annotations

import json
from typing import Any

# Reply headers that say when and by which machine a reply was sent, how long it took or what
# quota is left: a re-recording whose entry differs from the file's in these only keeps the
# file's (`key`). They are still recorded and replayed.
VOLATILE = frozenset(
    {
        "age",
        "cf-ray",
        "date",
        "expires",
        "openai-processing-ms",
        "req-cost-time",
        "request-id",
        "server",
        "server-timing",
        "via",
        "x-amz-cf-id",
        "x-amzn-requestid",
        "x-amzn-trace-id",
        "x-cloud-trace-context",
        "x-envoy-upstream-service-time",
        "x-request-id",
    }
)
_VOLATILE_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_WHEN = ("recorded_at", "elapsed_ms")


def key(entry: dict[str, Any]) -> str:
    """A file entry without what two recordings of one reply differ in: when it was recorded,
    how long it took (`elapsed_ms`, a stream's `frame_ms`), and the reply headers of `VOLATILE`,
    as one JSON text."""
    kept = {k: v for k, v in entry.items() if k not in _WHEN}
    extra = entry.get("extra")
    if isinstance(extra, dict):
        kept["extra"] = {k: v for k, v in extra.items() if k != "frame_ms"}
    kept["headers"] = [pair for pair in entry.get("headers") or () if not volatile(str(pair[0]))]
    return json.dumps(kept, sort_keys=True, ensure_ascii=False)


def volatile(header: str) -> bool:
    """Whether a reply header's value changes from one call to the next whatever the reply."""
    lowered = header.lower()
    return lowered in VOLATILE or lowered.startswith(_VOLATILE_PREFIXES)


__all__ = ["VOLATILE", "key", "volatile"]
