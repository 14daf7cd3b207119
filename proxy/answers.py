"""The replies the proxy writes itself: errors shaped like the providers' own, and its endpoints.

Every error body is `{"type": "error", "error": {"type": "pyrula_<kind>", "message": ...}}`, the
shape OpenAI and Anthropic both use, so their SDKs raise an `APIStatusError` whose message is
ours. `x-should-retry: false` stops the SDKs retrying an answer that cannot change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyrula.errors import ReplayMiss

JSON = b"application/json"
PAYLOAD_TOO_LARGE = 502  # the status of the answer to a reply over the record cap


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole reply made by the proxy; `close` ends the connection after it."""

    status: int
    body: bytes
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    close: bool = False

    def all_headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-type", JSON),
            *self.headers,
            (b"content-length", str(len(self.body)).encode()),
        ]


def error(status: int, kind: str, message: str, *, close: bool = False, **extra: Any) -> Answer:
    body = {"type": "error", "error": {"type": f"pyrula_{kind}", "message": message, **extra}}
    headers = [(b"x-pyrula-error", kind.encode())]
    if status < 500:
        headers.append((b"x-should-retry", b"false"))
    return Answer(status, _json(body), headers, close)


def ok(payload: dict[str, Any]) -> Answer:
    return Answer(200, _json(payload))


def bad_request(message: str, status: int = 400) -> Answer:
    kinds = {400: "bad_request", 408: "request_timeout", 413: "too_large", 431: "headers_too_large"}
    return error(status, kinds.get(status, "bad_request"), message, close=True)


def unauthorized() -> Answer:
    answer = error(
        401,
        "unauthorized",
        "pyrula proxy: missing or wrong proxy token; send 'Proxy-Authorization: Bearer <token>' "
        "(or 'X-Pyrula-Token: <token>') with the token the proxy was started with",
    )
    answer.headers.append((b"www-authenticate", b'Bearer realm="pyrula-proxy"'))
    return answer


def no_route(path: str, prefixes: list[str]) -> Answer:
    where = ", ".join(prefixes) or "none"
    return error(
        404,
        "no_route",
        f"pyrula proxy: no route for {path}; point the client's base URL at one of the "
        f"routes ({where}), add one with --route NAME=URL, or start the proxy with --upstream URL",
    )


def replay_miss(miss: ReplayMiss) -> Answer:
    """409 with the miss's message, whose advice is the proxy's own (flags and headers)."""
    return error(
        409,
        "replay_miss",
        f"pyrula proxy: {miss}",
        nearest=miss.nearest,
        differences=list(miss.diffs),
    )


def upstream_failed(url: str, exc: BaseException, *, timeout: bool) -> Answer:
    what = "timed out" if timeout else "failed"
    return error(
        504 if timeout else 502,
        "upstream_timeout" if timeout else "upstream_error",
        f"pyrula proxy: the upstream request to {url} {what}: {type(exc).__name__}: {exc}",
    )


def payload_too_large(problem: str) -> Answer:
    """502 for a reply over the store's record cap: not forwarded, not recorded, not retried."""
    answer = error(
        PAYLOAD_TOO_LARGE,
        "payload_too_large",
        f"pyrula proxy: the provider's reply was not forwarded: {problem}. The request was sent "
        "once and is not retried. Raise the cap with PYRULA_MAX_EVENT_PAYLOAD_BYTES (or "
        "PYRULA_MAX_RECORD_BYTES) where the proxy starts; image, audio and other multimodal "
        "replies run to several MB, so for them set it to e.g. 8000000",
    )
    answer.headers.append((b"x-should-retry", b"false"))
    answer.headers.append((b"x-pyrula-not-recorded", f"PayloadTooLarge: {problem}".encode()))
    return answer


def internal(exc: BaseException) -> Answer:
    return error(
        500, "internal_error", f"pyrula proxy failed on this request: {type(exc).__name__}: {exc}"
    )


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
