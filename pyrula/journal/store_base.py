"""What every store backend implements and shares: `Store`, `Txn`, the tables and locations.

The backends (`lmdb_store.py`, `postgres.py` and its `pg_*` modules) build on this module;
`store.py`, above them, is the factory that picks one for a location (`Store(location)`) and the
import path the layers above use. So the backends never import the module that imports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pyrula.errors import PayloadTooLarge, StoreError

DEFAULT_PATH = ".pyrula"
DEFAULT_MAX_RECORD_BYTES = 1_000_000
# Every store holds these named tables.
DATABASES = (
    "meta",
    "exchanges",
    "frames",
    "blobs",
    "runs",
    "events",
    "queue",
    "tokens",
    "flags",
    "withheld",
    "sent_index",
)
_URL_SCHEMES = ("postgresql://", "postgres://")

T = TypeVar("T")
# A row that must hold a value for a fenced put to happen: (key, value, db).
Fence = tuple[bytes, bytes, Any]


class Txn(Protocol):
    """One transaction on a store; `db` is a handle from `Store.db(name)`.

    Writes are only allowed inside `Store.write`; every key and value is bytes."""

    def get(self, key: bytes, default: None = None, *, db: Any) -> bytes | None: ...

    def get_many(self, keys: list[bytes], *, db: Any) -> dict[bytes, bytes]:
        """The values of those `keys` that exist (one round trip on PostgreSQL)."""
        ...

    def put(self, key: bytes, value: bytes, *, db: Any, overwrite: bool = True) -> bool: ...

    def delete(self, key: bytes, *, db: Any) -> bool: ...

    def delete_many(self, keys: list[bytes], *, db: Any) -> None:
        """Delete those of `keys` that exist (on PostgreSQL one statement, sent without waiting
        for its answer)."""
        ...

    def scan(
        self, db: Any, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) whose key starts with `prefix` (and is at least `start`), in key
        order."""
        ...

    def keys(self, db: Any, *, start: bytes = b"", limit: int) -> list[bytes]:
        """Up to `limit` keys from `start` on, in key order, without their values (one
        statement on PostgreSQL)."""
        ...

    def last(self, db: Any, prefix: bytes) -> tuple[bytes, bytes] | None:
        """The (key, value) with the greatest key starting with `prefix`, if any."""
        ...

    def wake(self) -> None:
        """Wake whoever waits on this store once the transaction commits (PostgreSQL's
        `NOTIFY`; nothing on LMDB, whose waiters poll)."""
        ...

    def try_lock(self, names: list[str]) -> list[str]:
        """Lock, for the rest of this write, each of `names` that no other write holds; return
        those locked, in order, without waiting for any (PostgreSQL's
        `pg_try_advisory_xact_lock`: a write begun with `scope=[]` takes names this way, as
        `scope=` would; LMDB has one writer at a time, so every name)."""
        ...

    def put_fenced(
        self,
        key: bytes,
        value: bytes,
        *,
        db: Any,
        after: bytes | None,
        fence: Fence | None,
        also: Sequence[tuple[bytes, bytes, Any]] = (),
    ) -> Callable[[], bool]:
        """Add `key` to `db` only if it is new, `after` is a key of `db` (when given) and the
        `fence` row holds its value (when given); if added, also put each (key, value, db) of
        `also`. Returns a function that tells whether it was added: on PostgreSQL the whole
        test is one statement, sent without waiting, so the puts of a group share one round
        trip and the first answer asked for fetches them all."""
        ...


def is_url(location: object) -> bool:
    """Whether a store location names a PostgreSQL server rather than a folder."""
    return isinstance(location, str) and location.startswith(_URL_SCHEMES)


def display(url: str) -> str:
    """The URL without its password, for messages and `stats`."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def shown(location: Location) -> str:
    """A store's location as messages show it: a folder's absolute path, or the URL without
    its password."""
    where = os.fspath(location)
    return display(where) if is_url(where) else str(Path(where).resolve())


def default_location() -> str:
    """`PYRULA_STORE`, else `./.pyrula`."""
    return os.environ.get("PYRULA_STORE") or DEFAULT_PATH


def default_path() -> Path:
    """The default store as a folder (for commands that only work on LMDB)."""
    return Path(default_location())


Location = str | os.PathLike[str]


class Store:
    """A journal store: a folder (LMDB) or a `postgresql://` URL (PostgreSQL).

    `Store(location)` opens the backend its location names. Every `write` commits durably before
    it returns, and writers are serialised, so what a caller was handed is kept.
    """

    location: str
    readonly: bool
    max_record_bytes: int
    exchanges_db: Any
    frames_db: Any
    blobs_db: Any
    meta_db: Any
    # What `write` itself retries (a lost connection): a write function lets these through.
    retryable: tuple[type[BaseException], ...] = ()
    # Whether a read is a round trip to a server (PostgreSQL) rather than a local lookup (LMDB).
    remote = False
    # Whether a commit flushes the disk before it returns (LMDB's `sync`; a server's own affair).
    syncs = False
    # The folder of a store kept in one (LMDB), where it may keep files of its own beside its
    # data (a cassette block's pending log); None for a store on a server.
    folder: Path | None = None

    # The backend class `Store(location)` opens for a location (`store.backend_for`): set by
    # `journal.store`, which imports the backends (they import this module, not it).
    backend_for: ClassVar[Callable[[str], type[Store]]]

    def __new__(cls, location: Location | None = None, **options: Any) -> Store:
        if cls is not Store:
            return super().__new__(cls)
        where = os.fspath(location) if location is not None else default_location()
        return super().__new__(Store.backend_for(where))

    # -- what each backend provides ---------------------------------------------------------------

    def db(self, name: str) -> Any:
        """The handle of a named table, for `Txn` methods."""
        raise NotImplementedError

    def write(
        self,
        fn: Callable[[Txn], T],
        *,
        scope: Sequence[str] | None = None,
        fenced_only: bool = False,
    ) -> T:
        """Run `fn` in one serialised write transaction and commit it.

        `fn` may run more than once (a retry), so it must only touch the transaction. With no
        `scope` the write excludes every other; with a `scope` (the names of what it touches,
        say one run's id) it excludes only writes of an overlapping scope and unscoped ones.
        LMDB serialises every writer whatever the scope; PostgreSQL lets scoped writes of
        different runs commit side by side (their commits grouped). `fenced_only` promises
        that `fn` only keeps fenced puts (`Txn.put_fenced`) and reads their answers after the
        commit: PostgreSQL then sends the write as one statement batch after `fn` returns."""
        raise NotImplementedError

    def read(self) -> AbstractContextManager[Txn]:
        """A read transaction (a consistent snapshot), as a context manager."""
        raise NotImplementedError

    def get(self, db: Any, key: bytes) -> bytes | None:
        """One value, read in a transaction of its own (the replay path)."""
        with self.read() as txn:
            value = txn.get(key, db=db)
        return None if value is None else bytes(value)

    def get_then(
        self, db: Any, key: bytes, then: Callable[[bytes], bytes], then_db: Any
    ) -> tuple[bytes, bytes, bytes | None] | None:
        """The value under `key`; the key `then` makes of it; and the value under that key in
        `then_db`: all from one read transaction. None when the first value is missing."""
        with self.read() as txn:
            return chained_get(txn.get, db, key, then, then_db)

    def close(self) -> None:
        raise NotImplementedError

    def stat(self) -> dict[str, Any]:
        """What the store holds: its location, format and entries per table."""
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------

    @property
    def backend(self) -> str:
        """`lmdb` or `postgresql`."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def shared_handle(self) -> object:
        """What every `Store` of this process on the same store shares (LMDB's environment), so
        their writes can be grouped into one commit; a store of its own otherwise."""
        return self

    def commit_count(self) -> int | None:
        """A number that moves with every commit any process makes to the store, where the
        backend has one at no cost (LMDB's last transaction id); None elsewhere."""
        return None

    def wakeups(self) -> Any:
        """The store's wake-ups for the running event loop (`journal.wakeups.Wakeups`), or None
        where waiters poll (LMDB)."""
        return None

    def check_size(self, size: int, what: str = "record") -> None:
        if size > self.max_record_bytes:
            raise PayloadTooLarge(size, self.max_record_bytes, what)

    def iter_prefix(
        self, db: Any, prefix: bytes, *, after: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) in `db` whose key starts with `prefix`, in key order; with `after`,
        only the keys past it (a page's cursor: where the previous page ended)."""
        if db is None:
            return
        start = None if after is None or after < prefix else after + b"\x00"
        with self.read() as txn:
            yield from txn.scan(db, prefix, start=start)

    def get_meta(self, key: bytes) -> bytes | None:
        """A value kept beside the records (a cassette file's digest, say), or None."""
        with self.read() as txn:
            value = txn.get(key, db=self.meta_db)
            return None if value is None else bytes(value)

    def put_meta(self, key: bytes, value: bytes) -> None:
        """Keep `value` under `key` beside the records, committed before this returns."""
        self.write(lambda txn: txn.put(key, value, db=self.meta_db))

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chained_get(
    get: Callable[..., Any], db: Any, key: bytes, then: Callable[[bytes], bytes], then_db: Any
) -> tuple[bytes, bytes, bytes | None] | None:
    """`Store.get_then`'s two reads, through one transaction's `get`."""
    first = get(key, db=db)
    if first is None:
        return None
    first = bytes(first)
    second_key = then(first)
    second = get(second_key, db=then_db)
    return first, second_key, None if second is None else bytes(second)


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with `prefix` (b"" when none is)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b""
    return stripped[:-1] + bytes([stripped[-1] + 1])


def record_cap(max_record_bytes: int | None, max_event_payload_bytes: int | None) -> int:
    """The per-record cap: an argument (either name: `max_event_payload_bytes` is the spec's),
    else `PYRULA_MAX_RECORD_BYTES` or `PYRULA_MAX_EVENT_PAYLOAD_BYTES`, else 1,000,000."""
    if max_record_bytes and max_event_payload_bytes and max_record_bytes != max_event_payload_bytes:
        raise StoreError(
            "max_record_bytes and max_event_payload_bytes name the same cap: give one of them"
        )
    for name in ("PYRULA_MAX_RECORD_BYTES", "PYRULA_MAX_EVENT_PAYLOAD_BYTES"):
        value = os.environ.get(name)
        if value and not (max_record_bytes or max_event_payload_bytes):
            if not value.isdigit():
                raise StoreError(f"{name}={value!r} is not a number of bytes")
            return int(value)
    return max_record_bytes or max_event_payload_bytes or DEFAULT_MAX_RECORD_BYTES
