"""One exchange's write, encoded once: what `Exchanges.prepare` makes and `Exchanges.apply` puts.

Apart from `exchanges.py` because the pending log (`pending.py`) keeps, writes and reads these
too, and `exchanges.py` imports the pending log: both import this module, not each other.
"""

from __future__ import annotations

from typing import NamedTuple

from pyrula.journal.records import ExchangeRecord


class PreparedExchange(NamedTuple):
    """One exchange's write, encoded (`Exchanges.prepare`): the record under `key` (`value`:
    its header and first page), its further pages (page key, checksummed page), its request's
    blobs (digest, bytes) and its sent-index entry (sent digest, fingerprint), if any."""

    key: bytes
    record: ExchangeRecord
    value: bytes
    pages: list[tuple[bytes, bytes]]
    blobs: list[tuple[bytes, bytes]]
    sent: tuple[bytes, bytes] | None
