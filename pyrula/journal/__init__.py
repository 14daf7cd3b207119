"""The journal: an LMDB store of recorded exchanges (and, later, runs and their events)."""

from pyrula.journal import cassette_file
from pyrula.journal.exchanges import Exchange, ExchangeRecord, Exchanges, StoredExchange
from pyrula.journal.recorder import Reply, record_exchange
from pyrula.journal.store import Store, default_path, open_store

__all__ = [
    "Exchange",
    "ExchangeRecord",
    "Exchanges",
    "Reply",
    "Store",
    "StoredExchange",
    "cassette_file",
    "default_path",
    "open_store",
    "record_exchange",
]
