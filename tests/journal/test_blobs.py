"""Request documents by content: each part serialised and hashed once when it is recorded, with
the same blobs and the same reference as before that (the digests below were made by the code
that scrubbed, re-parsed and re-serialised every document), and a secret still masked."""

from __future__ import annotations

import hashlib
import json

import pytest
from pyrula.fingerprints import RequestParts, canonical_json, canonicalize

from pyrula.journal import blobs, recorder
from pyrula.journal.store import Store

KEY = "sk-test-0123456789abcdefghijklmnop"
HISTORY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Summarise the figures: " + "revenue up, costs flat. " * 8},
    {"role": "assistant", "content": "Revenue rose; costs held."},
]
DOCS = {
    "chat": {
        "surface": "openai.chat",
        "method": "POST",
        "url": "https://api.openai.com/v1/chat/completions",
        "compared": {"messages": HISTORY, "tools": [], "response_format": None},
        "meta": {"model": "gpt-4o-mini", "temperature": 0.2},
    },
    "edges": {
        "surface": "generic",
        "method": "POST",
        "url": "http://x.test/?a=1",
        "compared": {
            "long": "z" * 300,
            "ref_like": {"$blob": "not a reference"},
            "empty": [],
            "nested": [[1, [2, 3]], {"b": 1, "a": [True, None, -0.0, 1e300]}],
            "text": 'caf\u00e9 \U0001f600 \u2028 lone \ud800 quote " back \\ nul \x00',
        },
        "meta": {},
        "extra": ["a", "b"],
    },
}
# (reference, sha256 of the sorted digest+bytes of every blob, how many blobs), as before.
BEFORE = {
    "chat": (
        "250dc16a837abd0c9b307943a9f88556ee1422791e2a95fe4ccf3b355d19f9f0",
        "dacb4e0f229b0a130ba63f558ac2473b4971a8c5c3ea85eaec1109f75bd761a6",
        7,
    ),
    "edges": (
        "fa0da1c7c4bf567b7bf24dc0d8b5607c7023eacf84b0ce1d9671c4eaa0547f87",
        "d15f8fccfa48c94b3f57a706692293e5d65ff946977ff045d6a4619f93d19e4d",
        6,
    ),
    "clean": (
        "bbf272705d57d3fa598f6f13714918766b692f46a08bd6f7be747cb3df5fb629",
        "f7b1f29899410b71726a54cc63d2a1e47ec0b22f4cac5b454efd051af0acec2d",
        9,
    ),
    "echoed key": (
        "ccc41995bbf0f35d252ea15dc3a28cdb642b55b6229e604d499bc2cabce922b2",
        "e0078608414b5153ee1879cf4e7ca93e8a3a1f1e07215d0945aaa23c51550f4c",
        9,
    ),
}
REQUESTS = {
    "clean": "What changed?",
    "echoed key": f"my key is {KEY}, and AKIAABCDEFGHIJKLMNOP too",
}


def _chat(content: str) -> RequestParts:
    body = json.dumps(
        {"model": "gpt-4o-mini", "messages": [*HISTORY, {"role": "user", "content": content}]}
    )
    return RequestParts(
        "POST",
        "https://api.openai.com/v1/chat/completions?key=" + "q" * 12,
        {"authorization": f"Bearer {KEY}", "content-type": "application/json"},
        body.encode(),
    )


def _fingerprint(encoded: blobs.EncodedRequest) -> tuple[str, str, int]:
    stored = b"".join(sorted(digest + data for digest, data in encoded.blobs))
    return encoded.ref, hashlib.sha256(stored).hexdigest(), len(encoded.blobs)


@pytest.mark.parametrize("name", sorted(DOCS))
def test_a_document_encodes_to_the_blobs_it_always_had(name):
    encoded = blobs.encode_request(DOCS[name])
    assert _fingerprint(encoded) == BEFORE[name]
    # The length the size cap counts, added up from the parts, is the whole document's.
    assert encoded.size == len(canonical_json(DOCS[name]))
    assert blobs.request_ref(DOCS[name]) == BEFORE[name][0]


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_a_recorded_request_keeps_the_blobs_it_always_had(name):
    parts = _chat(REQUESTS[name])
    encoded = recorder.scrubbed_request(parts, canonicalize(parts))
    assert _fingerprint(encoded) == BEFORE[name]
    stored = b"".join(data for _digest, data in encoded.blobs)
    assert KEY.encode() not in stored and b"AKIA" not in stored and b"q" * 12 not in stored
    assert (b"[scrubbed]" in stored) == (name == "echoed key")
    document = recorder.request_document(parts, canonicalize(parts))
    assert encoded.size == len(canonical_json(document))


def test_stored_blobs_read_back_as_the_document(tmp_path):
    with Store(tmp_path / "s") as store:
        db = store.blobs_db
        encoded = blobs.encode_request(DOCS["edges"])
        ref = store.write(lambda txn: blobs.put_encoded(txn, db, encoded))
        with store.read() as txn:
            assert blobs.get_request(txn, db, ref) == json.loads(canonical_json(DOCS["edges"]))


@pytest.mark.parametrize(
    "extra",
    [
        {"metadata": {"note": f"key {KEY}"}},  # a small value, kept inline in the root
        {"user": "u" * 200 + KEY},  # a long value, kept as a blob of its own
        {"messages": [*HISTORY, {"role": "user", "content": f"Bearer {'t' * 20}"}]},  # a cell
    ],
    ids=["inline", "blob", "list element"],
)
def test_a_secret_anywhere_in_the_document_is_masked(extra):
    body = {"model": "gpt-4o-mini", "messages": HISTORY, **extra}
    parts = RequestParts(
        "POST",
        "https://api.openai.com/v1/chat/completions",
        {"authorization": f"Bearer {KEY}"},
        json.dumps(body).encode(),
    )
    encoded = recorder.scrubbed_request(parts, canonicalize(parts))
    stored = b"".join(data for _digest, data in encoded.blobs)
    assert KEY.encode() not in stored and b"t" * 20 not in stored
    assert b"[scrubbed]" in stored
    document = recorder.request_document(parts, canonicalize(parts))
    assert encoded.size == len(canonical_json(document))
