"""The sent index: a request's digest as sent -> its fingerprint, written as it is recorded.

Finding the fingerprint of a request never seen by the process means canonicalising it (parse,
strip, dump, hash). The `sent_index` table keeps, for each recorded request, the digest of the
request as it was sent (`fingerprints.sent_digest`: method, URL without secret parameters, the
headers its canonicalizer reads, body) against its fingerprint, so a replay finds the fingerprint
with one hash and one read in the read that fetches the record (`Exchanges.find_sent`).

It is derived data: nothing but that mapping, 32 bytes to 32 bytes, no request bytes and nothing
of a credential. An export, an import and a text cassette do not carry it; a request it does not
know takes the canonicalising path, which decides every replay exactly as before. Generic
requests are never indexed (`fingerprints.indexable`).
"""

from __future__ import annotations

from collections.abc import Callable

from pyrula.fingerprints import Canonical, RequestParts, indexable, sent_digest
from pyrula.journal.records import ExchangeRecord
from pyrula.journal.store import Store, Txn

TABLE = "sent_index"

Also = Callable[[Txn, ExchangeRecord], None]


def indexed(
    store: Store, parts: RequestParts, canonical: Canonical, also: Also | None
) -> Also | None:
    """`also` (what a record's write transaction adds) with the request's index entry added
    too, in the same transaction; `also` itself when the request is not to be indexed."""
    db = store.db(TABLE)
    if db is None or not indexable(canonical.surface):
        return also
    key = sent_digest(parts)
    value = bytes.fromhex(canonical.digest)

    def put(txn: Txn, record: ExchangeRecord) -> None:
        txn.put(key, value, db=db)  # the same value whenever the key is written again
        if also is not None:
            also(txn, record)

    return put
