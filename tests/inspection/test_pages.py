"""Exchanges a page at a time, off the key index or newest first: cursors, filters, the scan
budget, and what arrived since a page was read."""

from __future__ import annotations

from pathlib import Path

from pyrula.inspection.by_time import TimeOrder
from pyrula.inspection.pages import Query, TimePage, live_matches, newest_first, page
from pyrula.journal.exchanges import Exchange, Exchanges
from pyrula.journal.keys import cassette_key
from pyrula.journal.store import Store


def _fill(path: Path, count: int) -> Exchanges:
    exchanges = Exchanges(Store(path))
    for i in range(count):
        name = "alpha" if i % 2 else "beta"
        exchanges.put(
            cassette_key(name, f"{i:064x}", 0),
            Exchange(
                request_doc={
                    "compared": {"messages": [{"role": "user", "content": f"q{i}"}]},
                    "meta": {"model": "gpt-x" if i % 3 else "claude-y"},
                },
                surface="openai.chat",
                fingerprint=f"{i:064x}",
                method="POST",
                url="https://api.openai.com/v1/chat/completions",
                status=500 if i == 7 else 200,
                headers=[],
                frames=[f'{{"answer": "a{i}"}}'.encode()],
                streamed=False,
                elapsed_ms=1.0,
                namespace=name,
            ),
        )
    return exchanges


def test_pages_follow_on_from_their_cursor_and_cover_every_exchange_once(tmp_path: Path) -> None:
    exchanges = _fill(tmp_path / "s", 25)
    seen: list[str] = []
    after = None
    pages = 0
    while True:
        found = page(exchanges, after=after, limit=10)
        seen += [e.record.id for e in found.entries]
        pages += 1
        if found.after is None:
            break
        after = found.after
    assert pages == 3
    assert len(seen) == len(set(seen)) == 25


def test_filters_by_cassette_status_model_and_text(tmp_path: Path) -> None:
    exchanges = _fill(tmp_path / "s", 12)
    assert {e.namespace for e in page(exchanges, Query(cassette="alpha")).entries} == {"alpha"}
    assert len(page(exchanges, Query(cassette="alpha")).entries) == 6
    assert [e.record.status for e in page(exchanges, Query(status="5xx")).entries] == [500]
    assert len(page(exchanges, Query(model="claude")).entries) == 4  # 0, 3, 6, 9
    assert len(page(exchanges, Query(text="q11")).entries) == 1  # in the request
    assert len(page(exchanges, Query(text='"a10"')).entries) == 1  # in the reply
    assert page(exchanges, Query(cassette="gamma")).entries == []
    # The model each shown row asked for, read from its request document.
    assert set(page(exchanges).models.values()) == {"gpt-x", "claude-y"}


def test_a_rare_match_stops_at_the_budget_with_a_cursor_to_look_further(tmp_path: Path) -> None:
    exchanges = _fill(tmp_path / "s", 30)
    found = page(exchanges, Query(status="500"), budget=5)
    assert found.scanned == 5
    assert found.after is not None
    rest = list(found.entries)
    while found.after is not None:
        found = page(exchanges, Query(status="500"), after=found.after, budget=5)
        assert found.scanned <= 5
        rest += found.entries
    assert [e.record.status for e in rest] == [500]


def _numbers(found: TimePage) -> list[int]:
    return [int(entry.record.fingerprint, 16) for entry in found.entries]


def test_newest_first_pages_back_and_forth_over_every_exchange(tmp_path: Path) -> None:
    order = TimeOrder(_fill(tmp_path / "s", 25))
    first = newest_first(order, limit=10)
    assert _numbers(first) == list(range(24, 14, -1))
    assert first.newer is None and first.older is not None
    second = newest_first(order, after=first.older, limit=10)
    assert _numbers(second) == list(range(14, 4, -1))
    last = newest_first(order, after=second.older, limit=10)
    assert _numbers(last) == [4, 3, 2, 1, 0]
    assert last.older is None  # nothing older
    assert last.newer is not None
    back = newest_first(order, before=last.newer, limit=10)
    assert _numbers(back) == _numbers(second)
    assert back.newer is not None
    top = newest_first(order, before=back.newer, limit=10)
    assert _numbers(top) == _numbers(first)
    assert top.newer is None  # back at the first page


def test_newest_first_keeps_to_a_cassette_and_counts_only_its_records(tmp_path: Path) -> None:
    order = TimeOrder(_fill(tmp_path / "s", 12))
    found = newest_first(order, Query(cassette="alpha"), limit=4)
    assert _numbers(found) == [11, 9, 7, 5]
    assert found.scanned == 4  # beta's records were passed over unread
    rest = newest_first(order, Query(cassette="alpha"), after=found.older, limit=4)
    assert _numbers(rest) == [3, 1]
    assert _numbers(newest_first(order, Query(cassette="alpha"), before=rest.newer)) == [
        11,
        9,
        7,
        5,
    ]


def test_exchanges_recorded_after_a_page_are_the_live_ones(tmp_path: Path) -> None:
    exchanges = _fill(tmp_path / "s", 4)
    order = TimeOrder(exchanges)
    shown = newest_first(order)
    _fill(tmp_path / "s", 6)  # records 0-3 again (each replaced: a new recording), 4 and 5 new

    order.refresh()
    found, models = live_matches(order, Query(cassette="beta"), shown.arrived)
    assert [int(e.record.fingerprint, 16) for e in found] == [0, 2, 4]
    assert set(models.values()) == {"claude-y", "gpt-x"}
    assert live_matches(order, Query(), order.refresh())[0] == []  # nothing since
    assert _numbers(newest_first(order)) == [5, 4, 3, 2, 1, 0]
