"""Exchanges a page at a time: straight off the store's key index (`page`), or newest first
through the time order (`newest_first`, `pyrula.inspection.by_time`).

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
from pyrula.inspection.by_time import Cursor, TimeOrder
from pyrula.inspection.reassemble import reassemble
from pyrula.inspection.records import Entry
from pyrula.journal.exchanges import ExchangeRecord, Exchanges, copied_from
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
        """The filters a record's header answers by itself. A forked run's copy of an exchange
        another run recorded is listed only for the fork (the run filter)."""
        if not self.run and copied_from(record) is not None:
            return False
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
        if _matched(exchanges, key, record, query, found, models) and len(found) >= limit:
            break
        if scanned >= budget:
            break
    else:
        last = None  # the scan ran off the end: no next page
    return Page(found, last, scanned, models)


def _matched(
    exchanges: Exchanges,
    key: bytes,
    record: ExchangeRecord,
    query: Query,
    found: list[Entry],
    models: dict[str, str],
) -> bool:
    """Add the record to `found` (its model to `models`) if it matches `query`; whether it did."""
    if not query.header_matches(record):
        return False
    model = _document_match(exchanges, key, record, query)
    if model == "" and not query.reads_documents:
        model = _model_of(exchanges.request(record))  # only for the rows shown
    if model is None:
        return False
    found.append(Entry(key, record))
    models[record.id] = model
    return True


@dataclass(frozen=True, slots=True)
class TimePage:
    """One page of matches, newest first, with the cursors of the pages on either side."""

    entries: list[Entry]
    older: Cursor | None  # the next page's `after`; None: nothing older
    newer: Cursor | None  # the previous page's `before`; None: this is the first page
    scanned: int  # how many records this page looked at
    models: dict[str, str]  # record id -> the model asked for
    arrived: int  # the time order's arrival count when read: live rows are the ones after it


def newest_first(
    order: TimeOrder,
    query: Query = Query(),
    *,
    after: Cursor | None = None,
    before: Cursor | None = None,
    limit: int = PAGE_SIZE,
    budget: int = SCAN_BUDGET,
) -> TimePage:
    """Up to `limit` matching exchanges, newest first: the ones recorded before `after` (the
    newest without it), or with `before` the ones recorded just after it (a previous page).

    A key outside the query's prefix costs a comparison; each other record read counts against
    `budget`, as in `page`."""
    arrived = order.refresh()
    exchanges = order.exchanges
    prefix = query.key_prefix()
    found: list[Entry] = []
    models: dict[str, str] = {}
    scanned = 0
    first: Cursor | None = None
    last: Cursor | None = None
    ran_off = True
    for cursor in order.newer(before) if before is not None else order.older(after):
        first = first or cursor
        last = cursor
        if not cursor.key.startswith(prefix):
            continue
        got = exchanges.get(cursor.key)
        scanned += 1
        matched = got is not None and _matched(exchanges, cursor.key, got[0], query, found, models)
        if (matched and len(found) >= limit) or scanned >= budget:
            ran_off = False
            break
    older: Cursor | None
    newer: Cursor | None
    if before is not None:  # read back from `before`: the newest match last
        found.reverse()
        newer = None if ran_off or last is None or order.is_newest(last) else last
        older = first or before
    else:
        older = None if ran_off or last is None or order.is_oldest(last) else last
        start = first or after
        newer = None if start is None or order.is_newest(start) else start
    return TimePage(found, older, newer, scanned, models, arrived)


def live_matches(
    order: TimeOrder, query: Query, arrived: int
) -> tuple[list[Entry], dict[str, str]]:
    """The exchanges matching `query` that arrived (new or replaced) after number `arrived`,
    oldest first (each put on top of the list in turn leaves the newest on top), with their
    models; `order` must have been refreshed."""
    exchanges = order.exchanges
    prefix = query.key_prefix()
    found: list[Entry] = []
    models: dict[str, str] = {}
    for cursor in sorted(order.arrived_after(arrived)):
        got = exchanges.get(cursor.key) if cursor.key.startswith(prefix) else None
        if got is not None:
            _matched(exchanges, cursor.key, got[0], query, found, models)
    return found, models


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
