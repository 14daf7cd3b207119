"""Recorded exchanges as an HTTP Archive (HAR 1.2), for browser devtools and HAR viewers.

Only what was kept is exported: the request's headers were never recorded (credentials live
there), so each request carries just its content type, and its body is the scrubbed canonical
request document rather than the bytes that were sent.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pyrula
from pyrula.fingerprints import canonical_json
from pyrula.inspection.records import Loaded

HAR_VERSION = "1.2"


def har_log(exchanges: Iterable[Loaded]) -> dict[str, Any]:
    return {
        "log": {
            "version": HAR_VERSION,
            "creator": {"name": "pyrula", "version": pyrula.__version__},
            "entries": [_entry(exchange) for exchange in exchanges],
        }
    }


def _entry(exchange: Loaded) -> dict[str, Any]:
    record = exchange.record
    started = record.recorded_at - record.elapsed_ms / 1000
    return {
        "startedDateTime": datetime.fromtimestamp(started, UTC).isoformat(timespec="milliseconds"),
        "time": record.elapsed_ms,
        "request": _request(exchange),
        "response": _response(exchange),
        "cache": {},
        # Only the whole round trip was measured: it is all "wait".
        "timings": {"send": 0, "wait": record.elapsed_ms, "receive": 0},
        "comment": f"pyrula exchange {record.id}",
        "_pyrula": {
            "id": record.id,
            "key": exchange.key.hex(),
            "namespace": record.namespace,
            "surface": record.surface,
            "fingerprint": record.fingerprint,
            "streamed": record.streamed,
        },
    }


def _request(exchange: Loaded) -> dict[str, Any]:
    record = exchange.record
    text = canonical_json(exchange.request).decode("utf-8", "surrogatepass")
    return {
        "method": record.method,
        "url": record.url,
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": [{"name": "content-type", "value": "application/json"}],
        "queryString": [
            {"name": name, "value": value}
            for name, value in parse_qsl(urlsplit(record.url).query, keep_blank_values=True)
        ],
        "postData": {"mimeType": "application/json", "text": text},
        "headersSize": -1,
        "bodySize": len(text.encode("utf-8", "surrogatepass")),
    }


def _response(exchange: Loaded) -> dict[str, Any]:
    record = exchange.record
    body = exchange.body
    mime = next((v for k, v in record.headers if k.lower() == "content-type"), "")
    content: dict[str, Any] = {"size": len(body), "mimeType": mime or "application/octet-stream"}
    try:
        content["text"] = body.decode("utf-8")
    except UnicodeDecodeError:
        content["text"] = base64.b64encode(body).decode("ascii")
        content["encoding"] = "base64"
    return {
        "status": record.status,
        "statusText": _reason(record.status),
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": [{"name": name, "value": value} for name, value in record.headers],
        "content": content,
        "redirectURL": "",
        "headersSize": -1,
        "bodySize": len(body),
    }


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
