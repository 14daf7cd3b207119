"""`Exchanges.restore`: exchanges written back exactly as they were stored, or not at all."""

from __future__ import annotations

import dataclasses

import pytest

from pyrula.errors import RestoreRefused
from pyrula.journal import Exchange, Exchanges, Store, StoredExchange

FRAMES = [b"data: one\n\n", b"x" * 70_000, b"data: [DONE]\n\n"]  # more than one page


def _record(store: Store, key: bytes, text: str) -> StoredExchange:
    exchanges = Exchanges(store)
    exchanges.put(
        key,
        Exchange(
            request_doc={"surface": "generic", "compared": {"q": text}, "meta": {}},
            surface="generic",
            fingerprint="0" * 64,
            method="POST",
            url="http://x.test/",
            status=200,
            headers=[("content-type", "text/event-stream")],
            frames=FRAMES,
            streamed=True,
            elapsed_ms=3.25,
            namespace="restore",
        ),
    )
    record, first_page = exchanges.get(key)  # type: ignore[misc]
    return StoredExchange(
        key, record, exchanges.request(record), list(exchanges.frames(record, first_page))
    )


def test_a_restored_exchange_reads_back_as_it_was_stored(tmp_path):
    with Store(tmp_path / "from") as source:
        saved = _record(source, b"k1", "a")
    with Store(tmp_path / "to") as target:
        exchanges = Exchanges(target)
        assert exchanges.restore([saved]) == 0
        assert exchanges.restore([saved]) == 1  # the second time it replaces itself
        record, first_page = exchanges.get(b"k1")  # type: ignore[misc]
        assert record == saved.record
        assert list(exchanges.frames(record, first_page)) == FRAMES
        assert exchanges.request(record) == saved.request


def test_a_restore_that_cannot_write_one_exchange_writes_none(tmp_path):
    with Store(tmp_path / "from") as source:
        first = _record(source, b"k1", "a")
        second = _record(source, b"k2", "b")
    edited = dataclasses.replace(second, request={**second.request, "compared": {"q": "edited"}})
    with Store(tmp_path / "to") as target:
        exchanges = Exchanges(target)
        with pytest.raises(RestoreRefused, match="does not match") as refused:
            exchanges.restore([first, edited])
        assert refused.value.index == 1
        assert list(exchanges.scan()) == []
        exchanges.restore([first])
        moved = dataclasses.replace(first, key=b"elsewhere")
        with pytest.raises(RestoreRefused, match="already belongs") as refused:
            exchanges.restore([moved])
        assert refused.value.index == 0
        assert [key for key, _ in exchanges.scan()] == [b"k1"]
