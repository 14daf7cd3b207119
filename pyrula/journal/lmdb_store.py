"""The LMDB store: one environment per folder, one write transaction per journaled fact."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from pyrula.errors import (
    NotAStore,
    StoreCorrupt,
    StoreError,
    StoreFormatError,
    StoreFull,
    StoreNotFound,
)
from pyrula.journal.lmdb_file import LengthWatch, check_data_file, unusable
from pyrula.journal.store_base import DATABASES as _DATABASES
from pyrula.journal.store_base import (
    Fence,
    Location,
    Store,
    chained_get,
    default_path,
    prefix_end,
    record_cap,
)

# The store's own format: bump on any change to how records are laid out.
STORE_FORMAT = 1
_MAGIC = b"pyrula-store"

_INITIAL_MAP_SIZE = 64 << 20

T = TypeVar("T")


class LmdbStore(Store):
    """A journal store in one folder.

    Several processes may open the same folder: LMDB serialises writers and never blocks readers.
    Every `write` commits (fsync by default) before it returns, so what a caller was handed is on
    disk.

    `metasync=False` (opt-in; only with `sync=True`) makes each commit one device flush instead
    of two: the data pages are flushed, the meta page that points at them is written but not
    flushed until the next commit. A power loss or OS crash may then undo the last committed
    transaction (the store opens at the one before it, whole); it never corrupts the store, and
    a process crash (even SIGKILL) loses nothing. See docs/record-format.md.
    """

    def __init__(
        self,
        path: Location | None = None,
        *,
        create: bool = True,
        readonly: bool = False,
        sync: bool = True,
        max_record_bytes: int | None = None,
        map_size: int = _INITIAL_MAP_SIZE,
        max_event_payload_bytes: int | None = None,
        metasync: bool = True,
    ) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.folder = self.path
        self.location = str(self.path)
        self.max_record_bytes = record_cap(max_record_bytes, max_event_payload_bytes)
        self.readonly = readonly
        self._key = str(self.path.resolve())
        with _registry_lock:
            shared = _environments.get(self._key)
            if shared is not None:
                # LMDB forbids opening one environment twice in a process: share it.
                if shared.readonly and not readonly:
                    raise StoreError(f"{self.path} is already open read-only in this process")
                shared.refs += 1
            else:
                env = self._open(create, readonly, sync, map_size, metasync)
                shared = _SharedEnv(env, readonly, LengthWatch(self.path / "data.mdb"))
                _environments[self._key] = shared
        self._shared = shared
        self.env = shared.env
        self._dbs = shared.dbs
        self.meta_db = self._dbs["meta"]
        self.exchanges_db = self._dbs["exchanges"]
        self.frames_db = self._dbs["frames"]
        self.blobs_db = self._dbs["blobs"]
        self.syncs = bool(self.env.flags()["sync"])  # `sync=True`, the default

    # -- opening -------------------------------------------------------------------------------

    def _open(
        self, create: bool, readonly: bool, sync: bool, map_size: int, metasync: bool = True
    ) -> lmdb.Environment:
        try:
            if self._check_folder(create=create and not readonly):
                self._create(map_size)
                self._probe(self.path / "data.mdb")
        except OSError as exc:  # a folder or file it cannot read, write or make
            raise unusable(self.path, exc) from exc
        try:
            return lmdb.open(
                str(self.path),
                map_size=map_size,
                max_dbs=len(_DATABASES) + 1,
                subdir=True,
                sync=sync,
                metasync=metasync,
                readonly=readonly,
                max_readers=512,
            )
        except lmdb.Error as exc:
            # Its data file was just read as a Pyrula store: what fails is the lock file, or
            # what this process may do in the folder, not the recordings.
            raise StoreError(
                f"{self.path} holds a Pyrula store that LMDB could not open ({exc}); check that "
                "this user may write the folder and its lock.mdb (a lock.mdb that is a folder "
                "or not LMDB's can be deleted while no process has the store open), or open "
                "it read-only"
            ) from exc

    def _create(self, map_size: int) -> None:
        """Build a new store beside the target and rename it into place.

        Several processes may create the same store at once (pytest-xdist workers): the rename
        is atomic, so each sees either no store or a whole one, never a half-made LMDB file.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", dir=self.path.parent))
        try:
            env = lmdb.open(str(staging), map_size=map_size, max_dbs=len(_DATABASES) + 1)
            _initialise(env)
            env.close()
            try:
                os.rename(staging, self.path)  # replaces an empty folder, never a filled one
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _check_folder(self, *, create: bool) -> bool:
        """Refuse anything that is not a Pyrula store before LMDB writes a byte; True if new."""
        data = self.path / "data.mdb"
        if not self.path.exists():
            if not create:
                raise StoreNotFound(self.path, _MISSING_FIX)
            return True
        if not self.path.is_dir():
            raise NotAStore(
                f"{self.path} is a file, not a store folder; point PYRULA_STORE at a folder"
            )
        if not data.exists() and not data.is_symlink():
            if any(self.path.iterdir()):
                raise NotAStore(
                    f"{self.path} is a non-empty folder without a Pyrula store in it; "
                    "choose an empty or new folder"
                )
            if not create:
                raise StoreNotFound(self.path, _MISSING_FIX)
            return True
        self._probe(data)
        return False

    def _probe(self, data: Path) -> None:
        """Read the format marker with a read-only, lock-free open that cannot change the files."""
        check_data_file(data)
        try:
            env = lmdb.open(str(self.path), readonly=True, lock=False, max_dbs=len(_DATABASES) + 1)
        except lmdb.Error as exc:
            raise StoreCorrupt(
                f"{data} is not a readable LMDB file ({exc}); restore it from a copy or "
                "point PYRULA_STORE at another folder"
            ) from exc
        try:
            with env.begin() as txn:
                if txn.get(b"meta") is None:
                    raise NotAStore(
                        f"{self.path} is an LMDB environment but not a Pyrula store; "
                        "use a separate folder for Pyrula"
                    )
            meta = env.open_db(b"meta", create=False)
            with env.begin(db=meta) as txn:
                magic = txn.get(b"magic")
                version = txn.get(b"format")
        except lmdb.Error as exc:
            raise StoreCorrupt(f"{data} is damaged: {exc}") from exc
        finally:
            env.close()
        if magic != _MAGIC or version is None or not version.isdigit():
            raise NotAStore(f"{self.path} holds an LMDB database that Pyrula did not write")
        found = int(version)
        if found > STORE_FORMAT:
            raise StoreFormatError(
                f"{self.path} was written by a newer Pyrula (store format {found}, this one reads "
                f"up to {STORE_FORMAT}); upgrade pyrula to read it"
            )
        if found < 1:
            raise StoreFormatError(f"{self.path} has unknown store format {found}")

    def db(self, name: str) -> Any:
        return self._dbs[name]

    # -- transactions --------------------------------------------------------------------------

    @property
    def backend(self) -> str:
        return "lmdb"

    @property
    def closed(self) -> bool:
        return self._shared.refs == 0

    def write(
        self,
        fn: Callable[[Any], T],
        *,
        scope: Sequence[str] | None = None,
        fenced_only: bool = False,  # PostgreSQL's: an LMDB write costs the same either way
    ) -> T:
        """Run `fn` in one write transaction and commit it; grow the map and retry when full.

        `fn` may run more than once (after a map resize), so it must only touch the transaction.
        """
        if self.readonly:
            raise StoreError(f"{self.path} was opened read-only")
        self._check_length()
        while True:
            try:
                with self.env.begin(write=True) as txn:
                    result = fn(LmdbTxn(txn))
                self._shared.length.committed(self.env.info()["last_pgno"])
                return result
            except lmdb.MapFullError:
                self._grow()
            except lmdb.MapResizedError:
                # Another process grew the map: adopt its size and try again.
                self.env.set_mapsize(0)
            except lmdb.Error as exc:
                raise self._failure(exc) from exc

    @contextmanager
    def read(self) -> Iterator[LmdbTxn]:  # type: ignore[override]
        """A read transaction, as a context manager; damage found while reading raises
        `StoreCorrupt` naming the store, never a bare `lmdb` error."""
        txn = self._begin()
        try:
            with txn:
                yield LmdbTxn(txn)
        except lmdb.Error as exc:
            raise self._failure(exc) from exc

    def shared_handle(self) -> object:
        return self.env

    def commit_count(self) -> int | None:
        try:  # read from the meta pages every process commits to: no transaction
            return int(self.env.info()["last_txnid"])
        except lmdb.Error:
            return None  # closed: the read that follows says so

    def get(self, db: Any, key: bytes) -> bytes | None:
        """One value, read in a transaction of its own (the replay path: `read` without the
        context manager's cost); errors as `read` raises them."""
        txn = self._begin(db)
        try:
            value = txn.get(key)
            return None if value is None else bytes(value)
        except lmdb.Error as exc:
            raise self._failure(exc) from exc
        finally:
            txn.abort()

    def get_then(
        self, db: Any, key: bytes, then: Callable[[bytes], bytes], then_db: Any
    ) -> tuple[bytes, bytes, bytes | None] | None:
        """`Store.get_then` without the context manager's cost (a replay's path)."""
        txn = self._begin()
        try:
            return chained_get(txn.get, db, key, then, then_db)
        except lmdb.Error as exc:
            raise self._failure(exc) from exc
        finally:
            txn.abort()

    def _begin(self, db: Any = None) -> lmdb.Transaction:
        """A read transaction; after another process grew the map, at its new size."""
        self._check_length()
        try:
            return self.env.begin(db=db)
        except lmdb.MapResizedError:
            self.env.set_mapsize(0)
            return self.env.begin(db=db)
        except lmdb.Error as exc:  # a closed handle, say: typed, never a bare lmdb error
            raise self._failure(exc) from exc

    def _check_length(self) -> None:
        """Refuse a data file cut short since it was opened, before LMDB reads past its end."""
        short = self._shared.length.shortfall()
        if short is not None:
            raise StoreCorrupt(
                f"{self._shared.length.data} was truncated while open: {short[0]:,} bytes where "
                f"its own header names {short[1]:,} (something cut or replaced the file under "
                "this process); restore it from a copy"
            )

    def _failure(self, exc: lmdb.Error) -> StoreError:
        """The typed error for an LMDB failure: a full disk, a store already closed, or damage."""
        if isinstance(exc, lmdb.DiskError) or _disk_is_full(exc):
            return StoreFull(self.path, free_bytes(self.path), exc)
        if self.closed:  # not damage: LMDB says "closed/deleted/dropped object"
            return StoreError(
                f"the store at {self.path} was closed; open it again (Store(path)) to use it"
            )
        return StoreCorrupt(
            f"{self.path} is damaged ({exc}); restore it from a copy, or export what still "
            "reads with `pyrula journal export` into a new store"
        )

    def _grow(self) -> None:
        with self._shared.lock:
            current = self.env.info()["map_size"]
            self.env.set_mapsize(current * 2)

    def close(self) -> None:
        with _registry_lock:
            if self._shared.refs == 0:
                return
            self._shared.refs -= 1
            if self._shared.refs == 0:
                _environments.pop(self._key, None)
                self.env.close()

    def stat(self) -> dict[str, Any]:
        counts = {}
        with self.read() as txn:
            for name, db in self._dbs.items():
                if db is not None:
                    counts[name] = txn.txn.stat(db)["entries"]
        info = self.env.info()
        return {
            "path": str(self.path),
            "backend": "lmdb",
            "format": STORE_FORMAT,
            "map_size": info["map_size"],
            "file_bytes": (self.path / "data.mdb").stat().st_size,
            "entries": counts,
        }


_MISSING_FIX = (
    "check the path (--store, PYRULA_STORE), or record into it first; "
    "nothing is created where nothing would be recorded"
)


def free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _disk_is_full(exc: lmdb.Error) -> bool:
    """LMDB reports a failed write as EIO or ENOSPC in its message, not as a class."""
    text = str(exc)
    return any(os.strerror(code) in text for code in (errno.ENOSPC, errno.EIO, errno.EDQUOT))


def _initialise(env: lmdb.Environment) -> None:
    meta = env.open_db(b"meta", create=True)
    with env.begin(write=True, db=meta) as txn:
        txn.put(b"magic", _MAGIC, overwrite=False)
        txn.put(b"format", str(STORE_FORMAT).encode(), overwrite=False)


class _SharedEnv:
    """One process's handle on an environment, shared by every `Store` of that folder."""

    def __init__(self, env: lmdb.Environment, readonly: bool, length: LengthWatch) -> None:
        self.env = env
        self.readonly = readonly
        self.length = length
        self.refs = 1
        self.lock = threading.Lock()
        self.dbs: dict[str, Any] = {}
        for name in _DATABASES:
            try:
                self.dbs[name] = env.open_db(name.encode(), create=not readonly)
            except lmdb.NotFoundError:
                self.dbs[name] = None


_environments: dict[str, _SharedEnv] = {}
_registry_lock = threading.Lock()


class LmdbTxn:
    """An LMDB transaction behind the store's `Txn` interface.

    `get`, `put` and `delete` are the binding's own methods (no wrapper on the hot path); the
    prefix scans walk a cursor. `txn` is the binding's transaction, `cursor` its cursor."""

    __slots__ = ("cursor", "delete", "get", "put", "txn")

    def __init__(self, txn: lmdb.Transaction) -> None:
        self.txn = txn
        self.get = txn.get
        self.put = txn.put
        self.delete = txn.delete
        self.cursor = txn.cursor

    def scan(
        self, db: Any, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        cursor = self.txn.cursor(db=db)
        if not cursor.set_range(max(prefix, start or b"")):
            return
        for key, value in cursor:
            if not bytes(key).startswith(prefix):
                break
            yield bytes(key), bytes(value)

    def keys(self, db: Any, *, start: bytes = b"", limit: int) -> list[bytes]:
        cursor = self.txn.cursor(db=db)
        if limit <= 0 or not cursor.set_range(start):
            return []
        found = []
        for key in cursor.iternext(keys=True, values=False):
            found.append(bytes(key))
            if len(found) >= limit:
                break
        return found

    def delete_many(self, keys: list[bytes], *, db: Any) -> None:
        for key in keys:
            self.txn.delete(key, db=db)

    def get_many(self, keys: list[bytes], *, db: Any) -> dict[bytes, bytes]:
        found = {}
        for key in keys:
            value = self.txn.get(key, db=db)
            if value is not None:
                found[key] = bytes(value)
        return found

    def wake(self) -> None:
        """Nothing: LMDB's waiters poll (a local file is cheap to look at)."""

    def try_lock(self, names: list[str]) -> list[str]:
        """Every name: this is the only write transaction open."""
        return list(names)

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
        txn = self.txn
        added = (
            (fence is None or txn.get(fence[0], db=fence[2]) == fence[1])
            and (after is None or txn.get(after, db=db) is not None)
            and txn.put(key, value, db=db, overwrite=False)
        )
        if added:
            for also_key, also_value, also_db in also:
                txn.put(also_key, also_value, db=also_db)
        return lambda: bool(added)

    def last(self, db: Any, prefix: bytes) -> tuple[bytes, bytes] | None:
        cursor = self.txn.cursor(db=db)
        # The greatest key with the prefix sits just before the first key past all of them.
        after = prefix_end(prefix)
        found = cursor.prev() if after and cursor.set_range(after) else cursor.last()
        if found and bytes(cursor.key()).startswith(prefix):
            return bytes(cursor.key()), bytes(cursor.value())
        return None
