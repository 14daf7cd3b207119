"""The replay side of a run's session: a journaled exchange played back as the call's reply,
checked by request fingerprint first.

A journaled error is raised as the SDK's own (`ReplayedFailure`, in a call frame); a journaled
truncated stream ends as it did, with `ProviderStreamTruncated`; a replayed reply names no
request id, since the provider did not serve it for this request.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyrula.errors import ProviderStreamTruncated, ReplayInputChanged
from pyrula.fingerprints import Canonical, diff
from pyrula.journal.exchanges import ExchangeRecord, Exchanges
from pyrula.runtime.calls import ReplayedFailure
from pyrula.transport.core import Replay

TRUNCATED = ProviderStreamTruncated.__name__


def replayed(
    exchanges: Exchanges,
    found: tuple[ExchangeRecord, bytes],
    canonical: Canonical,
    position: str,
    run_id: str,
    *,
    framed: bool,
) -> Replay:
    """The journaled outcome at `position` as the call's reply (`framed`: the call is in an SDK
    call frame, whose journaled error is raised as the SDK's own)."""
    record, first_page = found
    if record.fingerprint != canonical.digest:
        raise changed(exchanges, record, canonical, position, run_id)
    if framed and (record.status >= 400 or record.status == 0):
        raise ReplayedFailure(record, exchanges.body(record, first_page))
    frames = exchanges.frames(record, first_page)
    failure = record.extra.get("failure")
    if isinstance(failure, dict) and failure.get("type") == TRUNCATED:
        frames = _cut_short(frames, str(failure.get("message", "")))
    return Replay(record.status, _not_a_served_request(record.headers), frames)


def changed(
    exchanges: Exchanges, record: ExchangeRecord, canonical: Canonical, position: str, run_id: str
) -> ReplayInputChanged:
    """A resumed run asked something else at `position` than what is journaled there."""
    recorded = exchanges.request(record).get("compared", {})
    differences = diff(recorded, canonical.compared) or ["the request's surface changed"]
    lines = "\n".join(f"  - {d}" for d in differences)
    return ReplayInputChanged(
        f"run {run_id}: the model call at {position} differs from the one journaled "
        f"there:\n{lines}\nA resumed run must ask what it asked before; start a new run (or "
        "fork this one) to ask something else.",
        differences=differences,
    )


def _cut_short(frames: Iterator[bytes], message: str) -> Iterator[bytes]:
    """A journaled truncated stream: what arrived, then the same error, as the reader reaches
    its end."""
    yield from frames
    raise ProviderStreamTruncated(message)


# A replayed reply was not served by the provider for this request, so it names no request id:
# the SDKs then report `request_id` as None, not an id whose logs hold some other attempt.
_REQUEST_IDS = frozenset({"request-id", "x-request-id"})


def _not_a_served_request(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in _REQUEST_IDS]
