"""Record formats: new records are written in format 3 (a binary header), records of formats 1
and 2 (a JSON header) still replay byte for byte, and a damaged or foreign header is
`StoreCorrupt`, never a decode error or wrong bytes."""

from __future__ import annotations

import struct
import zlib

import httpx2
import pytest

import pyrula
from pyrula.errors import RestoreRefused, StoreCorrupt
from pyrula.journal import Exchanges
from pyrula.journal.keys import namespace_prefix
from pyrula.journal.records import encode
from tests.fakes.provider import Upstream

FRAMES = [b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\n', b"data: [DONE]\n\n"]
URL = "https://api.openai.com/v1/chat/completions"
HEADERS = {"content-type": "text/event-stream", "x-request-id": "req_1"}


def _record(store_path, headers=HEADERS):
    upstream = Upstream(httpx2, lambda request: (200, headers, FRAMES))
    client = upstream.http_client(journal={})
    with pyrula.cassette("formats", "once", store=store_path):
        live, live_chunks = _send(client)
    return client, live, live_chunks


def _send(client):
    with client.stream("POST", URL, json={"messages": []}) as reply:
        return reply, list(reply.iter_raw())


def _replay(client, store_path):
    with pyrula.cassette("formats", "none", store=store_path):
        return _send(client)


def _stored(store):
    """The one recorded value of the cassette, as (key, value)."""
    with store.read() as txn:
        items = [
            (bytes(k), bytes(v))
            for k, v in txn.cursor(db=store.exchanges_db)
            if bytes(k).startswith(namespace_prefix("formats"))
        ]
    assert len(items) == 1
    return items[0]


def test_a_new_record_is_format_3_and_replays_byte_for_byte(store_path):
    client, live, live_chunks = _record(store_path)
    with pyrula.Store(store_path) as store:
        _key, value = _stored(store)
        assert value[0] == 0xC6
        record, _page = Exchanges(store).get(_key)
        assert record.format == 3
    replayed, chunks = _replay(client, store_path)
    assert chunks == live_chunks == FRAMES
    assert replayed.headers.multi_items() == [
        (k, v) for k, v in live.headers.multi_items() if k != "content-length"
    ]


@pytest.mark.parametrize("old_format", [1, 2])
def test_records_of_older_formats_still_replay_the_same(store_path, old_format):
    client, _live, live_chunks = _record(store_path)
    first, first_chunks = _replay(client, store_path)
    with pyrula.Store(store_path) as store:
        key, _value = _stored(store)
        record, page = Exchanges(store).get(key)
        old = encode(record._replace(format=old_format), page)  # what older Pyrula wrote
        assert old[0] == (0xC5 if old_format == 2 else 0x00)
        store.write(lambda txn: txn.put(key, old, db=store.exchanges_db))
        reread, reread_page = Exchanges(store).get(key)
        assert reread == record._replace(format=old_format) and reread_page == page
    replayed, chunks = _replay(client, store_path)
    assert chunks == first_chunks == live_chunks
    assert replayed.headers.multi_items() == first.headers.multi_items()


def test_a_header_holding_a_nul_is_kept_in_format_2(store_path):
    client, _live, live_chunks = _record(store_path, {**HEADERS, "x-odd": "a\x00b"})
    with pyrula.Store(store_path) as store:
        _key, value = _stored(store)
        assert value[0] == 0xC5
    replayed, chunks = _replay(client, store_path)
    assert chunks == live_chunks and replayed.headers["x-odd"] == "a\x00b"


def _checked(marker: int, body: bytes) -> bytes:
    return bytes([marker]) + struct.pack(">I", zlib.crc32(body)) + body


@pytest.mark.parametrize(
    "damage",
    [
        "short fixed part",
        "text longer than the value",
        "header count off",
        "extra not an object",
        "json header claiming format 3",
        "unknown marker",
    ],
)
def test_a_garbled_or_foreign_header_is_store_corrupt(store_path, damage):
    client, _live, _chunks = _record(store_path)
    with pyrula.Store(store_path) as store:
        key, value = _stored(store)
        body = value[5:]
        fixed = struct.Struct(">16s32s32sHBIIQddIII")
        fields = list(fixed.unpack_from(body))
        rest = body[fixed.size :]
        if damage == "short fixed part":
            bad = _checked(0xC6, body[:40])
        elif damage == "text longer than the value":
            fields[-2] = 1 << 30
            bad = _checked(0xC6, fixed.pack(*fields) + rest)
        elif damage == "header count off":
            fields[-3] += 1
            bad = _checked(0xC6, fixed.pack(*fields) + rest)
        elif damage == "extra not an object":
            text = rest[: fields[-2]]
            fields[-1] = 2
            bad = _checked(0xC6, fixed.pack(*fields) + text + b"[]" + rest[fields[-2] :])
        elif damage == "json header claiming format 3":
            record, page = Exchanges(store).get(key)
            json_value = encode(record._replace(format=2), page)
            header = json_value[9:].replace(b'"format":2', b'"format":3', 1)
            bad = _checked(0xC5, header)
        else:
            bad = _checked(0xC7, body)
        store.write(lambda txn: txn.put(key, bad, db=store.exchanges_db))
        with pytest.raises(StoreCorrupt, match="cassette 'formats'"):
            Exchanges(store).get(key)
    with pytest.raises(StoreCorrupt), pyrula.cassette("formats", "none", store=store_path):
        _send(client)


def test_an_export_of_a_format_3_record_imports_to_the_same_bytes(store_path, tmp_path):
    _record(store_path)
    with pyrula.Store(store_path) as store:
        key, value = _stored(store)
        exchanges = Exchanges(store)
        record, page = exchanges.get(key)
        item = pyrula.journal.StoredExchange(
            key, record, exchanges.request(record), list(exchanges.frames(record, page))
        )
    with pyrula.Store(tmp_path / "other") as other:
        Exchanges(other).restore([item])
        assert _stored(other) == (key, value)


@pytest.mark.parametrize(
    "change",
    [{"id": "AB" * 16}, {"id": "ab cd" + "a" * 27}, {"recorded_at": 1}, {"frames": 1 << 33}],
    ids=["upper-case id", "id with a space", "int time", "frames past u32"],
)
def test_a_format_3_record_its_layout_cannot_hold_is_refused_on_import(
    store_path, tmp_path, change
):
    _record(store_path)
    with pyrula.Store(store_path) as store:
        key, _value = _stored(store)
        exchanges = Exchanges(store)
        record, page = exchanges.get(key)
        item = pyrula.journal.StoredExchange(
            key,
            record._replace(**change),
            exchanges.request(record),
            list(exchanges.frames(record, page)),
        )
    with pyrula.Store(tmp_path / "other") as other:
        with pytest.raises(RestoreRefused, match="cannot be stored as it was exported") as refused:
            Exchanges(other).restore([item])
        assert refused.value.index == 0
        assert other.stat()["entries"]["exchanges"] == 0


@pytest.mark.parametrize(
    "field, value",
    [
        ("id", "AB" * 16),  # upper case
        ("id", "ab" * 15 + " a"),  # a space, which `bytes.fromhex` would skip
        ("id", "ab" * 15),  # short
        ("fingerprint", "g" * 64),  # not hex
        ("fingerprint", "\u0661" * 64),  # a digit, but not an ASCII one
        ("request", None),
    ],
)
def test_a_record_whose_ids_are_not_lower_case_hex_is_kept_exactly_in_format_2(field, value):
    from pyrula.journal.records import ExchangeRecord, decode, encode_newest

    good = ExchangeRecord(
        id="0f" * 16,
        surface="openai.chat",
        fingerprint="a1" * 32,
        request="b2" * 32,
        method="POST",
        url=URL,
        status=200,
        headers=[("content-type", "application/json")],
        frames=1,
        size=2,
        pages=1,
        streamed=False,
        recorded_at=1.5,
        elapsed_ms=2.5,
    )
    assert encode_newest(good, b"{}")[0].format == 3
    odd, value_bytes = encode_newest(good._replace(**{field: value}), b"{}")
    assert odd.format == 2 and getattr(odd, field) == value
    assert decode(value_bytes) == (odd, b"{}")
