"""Writing one live exchange: scrub it, then commit it. Every session records through here."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from pyrula.fingerprints import Canonical, RequestParts, canonical_json
from pyrula.journal import blobs, scrub, sent_index
from pyrula.journal.exchanges import Exchange, ExchangeRecord, Exchanges
from pyrula.journal.pending import PendingLog
from pyrula.journal.store import Txn


@dataclass(slots=True)  # not frozen: one per recording (as `Exchange`)
class Reply:
    """A whole live reply, as the transport saw it."""

    status: int
    headers: list[tuple[str, str]]
    frames: list[bytes]
    elapsed_ms: float
    streamed: bool
    # False when the body could not be decoded and is kept as sent, content-encoding and all.
    decoded: bool = True
    # When each frame arrived, in ms after the request was sent (a replay may keep the pace).
    frame_ms: tuple[float, ...] = ()


def request_document(
    parts: RequestParts, canonical: Canonical, secrets: list[bytes] | None = None
) -> dict[str, object]:
    """The request as it is kept: canonical fields only, no headers, no credentials."""
    if secrets is None:
        secrets = scrub.secret_values(parts.headers, parts.url)
    return _masked(_document(parts, canonical), secrets)


def scrubbed_request(
    parts: RequestParts,
    canonical: Canonical,
    secrets: list[bytes] | None = None,
) -> blobs.EncodedRequest:
    """`request_document`, encoded for the store (`blobs.encode_request`): each part serialised
    and hashed once. Secrets are looked for in the encoded parts' JSON, searched as one text;
    only a document they are found in is masked whole and parsed again (its parts then encoded
    afresh)."""
    if secrets is None:
        secrets = scrub.secret_values(parts.headers, parts.url)
    doc = _document(parts, canonical)
    encoded = blobs.encode_request(doc)
    if not scrub.holds_secret(encoded.texts, secrets):
        return encoded
    return blobs.encode_request(_masked(doc, secrets))


def _masked(doc: dict[str, Any], secrets: list[bytes]) -> dict[str, Any]:
    """`doc` with its secrets masked, as one JSON text (a secret cannot hide across its
    parts), and parsed again."""
    masked: dict[str, Any] = json.loads(
        scrub.scrub_bytes(canonical_json(doc), secrets, patterns=True)
    )
    return masked


def _document(parts: RequestParts, canonical: Canonical) -> dict[str, Any]:
    return {
        "surface": canonical.surface,
        "method": parts.method,
        "url": scrub.scrub_url(parts.url),
        "compared": canonical.compared,
        "meta": canonical.meta,
    }


class RequestSide(NamedTuple):
    """What a recording keeps of its request, which the reply does not change: the secrets to
    mask, the scrubbed document encoded for the store, and the sent digest. A transport that
    knows when the request left whole has it made then, while the provider works on the reply
    (`transport.core.Sink.sent`); else `record_exchange` makes it."""

    secrets: list[bytes]
    document: blobs.EncodedRequest
    sent: bytes | None


def request_side(parts: RequestParts, canonical: Canonical) -> RequestSide:
    secrets = scrub.secret_values(parts.headers, parts.url)
    document = scrubbed_request(parts, canonical, secrets)
    return RequestSide(secrets, document, sent_index.digest(parts, canonical))


def record_exchange(
    exchanges: Exchanges,
    key: bytes,
    parts: RequestParts,
    canonical: Canonical,
    reply: Reply,
    *,
    namespace: str = "",
    extra: dict[str, Any] | None = None,
    also: Callable[[Txn, ExchangeRecord], None] | None = None,
    index_sent: bool = False,
    pending: PendingLog | None = None,
    request: RequestSide | None = None,
) -> ExchangeRecord:
    """Scrub a live exchange and commit it under `key`; returns once it is on disk.

    `index_sent=True` adds the request's sent-index entry (`sent_index.py`) to the same commit:
    what a cassette records, whose replays look requests up by it. The record carries its
    digest either way.

    With a `pending` log (a cassette block's; `pending.py`) the exchange is appended there
    instead, durable all the same, and put in the store with its batch. `request`: the
    request's side, if it was made already (`request_side`)."""
    if request is None:
        request = request_side(parts, canonical)
    secrets, document, sent = request
    is_error = reply.status >= 400
    frames = reply.frames
    if secrets or is_error:
        # On the whole body, not per frame: a chunk boundary may fall inside a credential.
        frames = scrub.scrub_frames(frames, secrets, patterns=is_error)
    # A body kept undecoded keeps the content-encoding that tells a replay how to read it.
    headers = scrub.scrub_values(
        scrub.kept_reply_headers(reply.headers, keep_encoding=not reply.decoded), secrets
    )
    if not reply.streamed and any(k.lower() == "content-length" for k, _ in reply.headers):
        # SDKs expose the reply's headers (google-genai's `sdk_http_response`): a plain reply
        # that had a length replays with one, the length of the body as stored.
        headers.append(("content-length", str(sum(len(f) for f in frames))))
    extra = dict(extra or {})
    if reply.streamed and reply.frame_ms and len(reply.frame_ms) == len(frames):
        extra["frame_ms"] = [round(ms, 1) for ms in reply.frame_ms]
    if sent is not None:  # kept with the record, so an export or a text cassette carries it
        extra[sent_index.EXTRA] = sent.hex()
    exchange = Exchange(
        request_doc=document,
        surface=canonical.surface,
        fingerprint=canonical.digest,
        method=parts.method,
        url=scrub.scrub_url(parts.url),  # cached: the document's own call made it
        status=reply.status,
        headers=headers,
        frames=frames,
        streamed=reply.streamed,
        elapsed_ms=reply.elapsed_ms,
        namespace=namespace,
        extra=extra,
    )
    entry = sent_index.entry(sent, canonical) if index_sent else None
    if pending is not None and also is None:
        prepared = exchanges.prepare(key, exchange, sent=entry)
        pending.append(prepared)
        return prepared.record
    return exchanges.put(key, exchange, also=also, sent=entry)
