"""The sent index: a request's digest as sent -> its fingerprint, written as it is recorded.

Finding the fingerprint of a request never seen by the process means canonicalising it (parse,
strip, dump, hash). The `sent_index` table keeps, for each recorded request, the digest of the
request as it was sent (`fingerprints.sent_digest`: method, URL without secret parameters, the
headers its canonicalizer reads, body) against its fingerprint, so a replay finds the fingerprint
with one hash and one read in the read that fetches the record (`Exchanges.find_sent`).

It is derived data: nothing but that mapping, 32 bytes to 32 bytes, no request bytes and nothing
of a credential. Each record also keeps its own entry's digest, as `extra["sent"]` (hex), so an
export, its import and a text cassette carry it, and `Exchanges.restore` (an import, a text
cassette's cache rebuilt from its file) writes the entry again (`restore_entry`). A request the
index does not know takes the canonicalising path, which decides every replay exactly as before.
Generic requests are never indexed (`fingerprints.indexable`).

Only a cassette's replays read the index, so only what a cassette records writes it
(`record_exchange(index_sent=True)`: a cassette, the vcrpy import into one). A run's model calls
record none, which spares each of their commits a path through one more B-tree (about 3.5 of
the 18 pages of 4 KiB it writes; `benchmarks/bench_commit_pages.py`). Their records carry their
digests all the same.
"""

from __future__ import annotations

from typing import Any

from pyrula.fingerprints import Canonical, RequestParts, indexable, sent_digest
from pyrula.journal.records import ExchangeRecord
from pyrula.journal.store import Txn

TABLE = "sent_index"
EXTRA = "sent"  # the record's `extra` field holding its entry's digest, as hex


def digest(parts: RequestParts, canonical: Canonical) -> bytes | None:
    """The request's sent digest, or None when its surface is not indexed."""
    return sent_digest(parts) if indexable(canonical.surface) else None


def entry(sent: bytes | None, canonical: Canonical) -> tuple[bytes, bytes] | None:
    """The request's index entry (`sent`, from `digest` -> its fingerprint), which
    `Exchanges.prepare` writes with the record; None when it has none."""
    return None if sent is None else (sent, bytes.fromhex(canonical.digest))


def restore_entry(txn: Txn, db: Any, record: ExchangeRecord) -> None:
    """Write the index entry a restored record carries (`extra["sent"]`), if it carries a
    well-formed one for a surface that is indexed; anything else is left out, as derived data
    may be: its request is then canonicalised on replay."""
    sent = record.extra.get(EXTRA) if record.extra else None
    if db is None or not isinstance(sent, str) or not indexable(record.surface):
        return
    try:
        key, value = bytes.fromhex(sent), bytes.fromhex(record.fingerprint)
    except ValueError:
        return
    if len(key) == len(value) == 32:
        txn.put(key, value, db=db)
