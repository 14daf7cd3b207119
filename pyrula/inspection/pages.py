"""Exchanges a page at a time, straight off the store's key index.

A page starts where the previous one ended (its cursor is the last key shown) and reads keys in
order until it has `limit` matches or has looked at `budget` records: a rare filter on a big store
answers quickly with what it found so far and a cursor to look further, never by reading the
whole store. The cassette filter is a key prefix (an index seek); the run filter is the run's key
prefix. Surface, status and time are read from each record's header; model and text also read
its request document (and text its reply), so they cost more per record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyrula.fingerprints import provider_of
from pyrula.inspection.reassemble import reassemble
from pyrula.inspection.records import Entry
from pyrula.journal.exchanges import ExchangeRecord, Exchanges
from pyrula.journal.keys import CASSETTE_PREFIX, run_prefix

PAGE_SIZE = 50
SCAN_BUDGET = 5000


@dataclass(frozen=True, slots=True)
class Query:
    """Which exchanges to list; every filter is optional and they all must hold."""

    cassette: str | None = None  # cassette names starting with this
    run: str | None = None  # the model calls this run journaled
    surface: str | None = None  # a surface (`openai.chat`) or a provider (`groq`)
    status: str | None = None  # `200`, or a class: `2xx`, `4xx`, `5xx`
    model: str | None = None  # a part of the model name the request asked for
    text: str | None = None  # a part of the request or reply text
    since: float | None = None  # recorded at or after (Unix time)
    until: float | None = None  # recorded before (Unix time)

    def key_prefix(self) -> bytes:
        if self.run:
            return run_prefix(self.run)
        return CASSETTE_PREFIX + self.cassette.encode() if self.cassette else b""

    def header_matches(self, record: ExchangeRecord) -> bool:
        """The filters a record's header answers by itself."""
        if self.surface and self.surface not in (record.surface, provider_of(record.url)):
            return False
        if self.status and not _status_matches(self.status, record.status):
            return False
        if self.since is not None and record.recorded_at < self.since:
            return False
        return self.until is None or record.recorded_at < self.until

    @property
    def reads_documents(self) -> bool:
        return bool(self.model or self.text)


def _status_matches(wanted: str, status: int) -> bool:
    wanted = wanted.strip().lower()
    if len(wanted) == 3 and wanted.endswith("xx") and wanted[0].isdigit():
        return status // 100 == int(wanted[0])
    return wanted == str(status)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of matches and, when the store may hold more, the cursor to read on from."""

    entries: list[Entry]
    after: bytes | None  # pass back as `after` for the next page; None: nothing left
    scanned: int  # how many records this page looked at
    models: dict[str, str] = field(default_factory=dict)  # record id -> the model asked for


def page(
    exchanges: Exchanges,
    query: Query = Query(),
    *,
    after: bytes | None = None,
    limit: int = PAGE_SIZE,
    budget: int = SCAN_BUDGET,
) -> Page:
    """Up to `limit` matching exchanges past the key `after`, in key order."""
    found: list[Entry] = []
    models: dict[str, str] = {}
    scanned = 0
    last: bytes | None = None
    for key, record in exchanges.scan(query.key_prefix(), after=after):
        scanned += 1
        last = key
        if query.header_matches(record):
            model = _document_match(exchanges, key, record, query)
            if model == "" and not query.reads_documents:
                model = _model_of(exchanges.request(record))  # only for the rows shown
            if model is not None:
                found.append(Entry(key, record))
                models[record.id] = model
                if len(found) >= limit:
                    break
        if scanned >= budget:
            break
    else:
        last = None  # the scan ran off the end: no next page
    return Page(found, last, scanned, models)


def _model_of(document: dict[str, Any]) -> str:
    """The model a request document names (`modelId` for Bedrock converse), or ""."""
    meta = document.get("meta") or {}
    return str(meta.get("model") or meta.get("modelId") or "")


def _document_match(
    exchanges: Exchanges, key: bytes, record: ExchangeRecord, query: Query
) -> str | None:
    """The model the request asked for ("" when not read) if the record passes the model and
    text filters, else None."""
    if not query.reads_documents:
        return ""
    document = exchanges.request(record)
    model = _model_of(document)
    if query.model and query.model.lower() not in model.lower():
        return None
    if query.text:
        wanted = query.text.lower()
        haystack = json.dumps(document, ensure_ascii=False).lower()
        if wanted not in haystack and wanted not in record.namespace.lower():
            got = exchanges.get(key)
            body = exchanges.body(*got) if got is not None else b""
            said = body.decode("utf-8", "replace")
            if record.streamed:  # the text is split across deltas: search it joined
                said = reassemble(record.surface, body).text or said
            if wanted not in said.lower():
                return None
    return model
