"""The journal: an LMDB store of recorded exchanges (and, later, runs and their events)."""

from pyrula.journal.exchanges import ExchangeRecord, Exchanges
from pyrula.journal.recorder import Reply, record_exchange
from pyrula.journal.store import Store, default_path, open_store

__all__ = [
    "ExchangeRecord",
    "Exchanges",
    "Reply",
    "Store",
    "default_path",
    "open_store",
    "record_exchange",
]
