"""Cassettes: record a block's model calls once, replay them offline ever after.

Outside a run a recording is found by content: the request's fingerprint plus how many identical
requests came before it in this block, so a retried or repeated call gets the reply it got when
it was recorded. That key is one LMDB lookup, whatever the store holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar, cast, get_args

from pyrula import netguard
from pyrula.errors import (
    PayloadTooLarge,
    RecordRefused,
    ReplayMiss,
    StoreError,
    StoreNotFound,
    VerifyMismatch,
)
from pyrula.fingerprints import Canonical, RequestParts
from pyrula.journal import cassette_file, file_ahead, pending
from pyrula.journal.async_store import acall, offload
from pyrula.journal.exchanges import ExchangeRecord, Exchanges
from pyrula.journal.keys import namespace_prefix
from pyrula.journal.pending import PendingLog
from pyrula.journal.recorder import Reply, RequestSide, record_exchange, request_side
from pyrula.journal.store import Store, Txn, open_store
from pyrula.replay_miss import explain_miss
from pyrula.transport.core import Callbacks, Live, Plan, Replay, pop_session, push_session
from pyrula.verify import VerifyResult, compare_replies

Mode = Literal["once", "none", "new_episodes", "all", "verify"]
MODES: tuple[str, ...] = get_args(Mode)
F = TypeVar("F", bound=Callable[..., Any])
_U32 = struct.Struct(">I")


@dataclass
class CassetteStats:
    replayed: int = 0
    recorded: int = 0
    used: set[bytes] = field(default_factory=set)
    # Of `replayed`, those found by the request's sent digest without canonicalising it.
    sent_hits: int = 0


class Cassette:
    """A named set of recorded exchanges, active as a context manager or decorator.

    Modes: `once` records into an empty cassette and replays a filled one; `none` only replays
    (and blocks the network); `new_episodes` replays what it has and records the rest; `all`
    re-records everything; `verify` calls live and reports whether each reply still has the
    structure of its recording, changing nothing.
    """

    def __init__(
        self,
        name: str,
        mode: Mode = "once",
        *,
        store: Store | str | os.PathLike[str] | None = None,
        allow_hosts: Iterable[str] = (),
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown cassette mode {mode!r}; use one of {', '.join(MODES)}")
        if not name or "\x00" in name:
            raise ValueError("a cassette name must be a non-empty string without NUL")
        self.name = name
        self._prefix = namespace_prefix(name)  # of every key of this cassette (`cassette_key`)
        self.mode: Mode = mode
        self._store_arg = store
        # A text cassette: the file is the recording, the store only its cache.
        self.path = Path(path) if path is not None else None
        self._allow_hosts = tuple(allow_hosts)
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._token: object = None
        self._had_records = False
        self._finds_sent: bool | None = None  # see `replay_sent`
        self._sent_waits = False  # the store is on a server (`replay_sent`)
        self._planning: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None  # `aplan`
        self._deleted = 0
        self.stats = CassetteStats()
        self.verify_report: list[VerifyResult] = []
        # Mode all drops, at a block's successful end, the recordings it did not make again (not
        # where other blocks record into the same cassette: the pytest plugin's named ones).
        self.drops_stale = True
        # Inside a block, recordings may go to the process's pending log (`_pending_log`).
        self._in_block = False
        self._committed = 0
        self._last_recorded = 0.0  # time.monotonic() of the last recording's commit
        self._pending: PendingLog | None = None
        self._store: Store | None = None
        self._exchanges: Exchanges | None = None
        # What a replay miss tells the user to do; the proxy gives its own flags instead.
        self.miss_fix = _MISS_FIX
        self.unrecorded_fix = _UNRECORDED_FIX  # the cassette held nothing when it was entered
        self.repeat_fix = "Re-record with mode='new_episodes' if the extra call is intended."

    # -- the session the transports ask ----------------------------------------------------------

    @property
    def store(self) -> Store:
        if self._store is None:
            arg = self._store_arg
            if isinstance(arg, Store):
                self._store = arg
            else:
                self._store = self._open(arg)
        return self._store

    def _open(self, path: str | os.PathLike[str] | None) -> Store:
        """Replay-only mode needs recordings: a missing store is a mistyped path, not a new one."""
        try:
            return open_store(path, create=self.mode != "none" or self.path is not None)
        except StoreNotFound as exc:
            raise StoreNotFound(
                exc.path,
                f"cassette {self.name!r} replays only (mode 'none'); record first "
                "(mode='once', pytest: --pyrula-record-mode=once) or fix the store path "
                "(store=, --pyrula-store, PYRULA_STORE)",
            ) from None

    @property
    def exchanges(self) -> Exchanges:
        if self._exchanges is None:
            self._exchanges = Exchanges(self.store)
        return self._exchanges

    @property
    def _cap(self) -> int:
        cap: int = self.exchanges.store.max_record_bytes
        return cap

    def plan(self, parts: RequestParts, canonical: Canonical, *, blocking: bool = False) -> Plan:
        with self._lock:
            occurrence = self._seen.get(canonical.digest, 0)
            self._seen[canonical.digest] = occurrence + 1
        key = self._prefix + bytes.fromhex(canonical.digest) + _U32.pack(occurrence)

        if self.mode == "all":
            return Live(self._recording(key, parts, canonical))
        exchanges = self.exchanges
        if self._pending is not None and self._pending.holds(key):
            self._pending.fold()
        found = exchanges.get(key)
        if self.mode == "verify":
            if found is None:
                warnings.warn(
                    f"cassette {self.name!r} has no recording for a {canonical.surface} call "
                    "to verify against; it ran live and nothing was kept",
                    stacklevel=2,
                )
                return Live(None)
            return Live(Callbacks(self._verifier(found[0], found[1], canonical)))
        if found is not None:
            return self._replayed(key, *found)
        if self.mode == "none" or (self.mode == "once" and self._had_records):
            with self._lock:
                # A miss consumed no recording: a retry of the same request is the same miss.
                self._seen[canonical.digest] = occurrence
            raise self._miss(parts, canonical, occurrence)
        return Live(self._recording(key, parts, canonical))

    def _recording(self, key: bytes, parts: RequestParts, canonical: Canonical) -> Callbacks:
        """The sink that records a live reply under `key` (its write off an async client's loop
        where the store is on a server)."""
        made: list[RequestSide] = []

        def sent() -> None:  # the request's side of the record, while the provider works
            with contextlib.suppress(Exception):  # made again at the reply, raising there
                made.append(request_side(parts, canonical))

        recorder = self._recorder(key, parts, canonical, made)
        return Callbacks(recorder, cap=self._cap, offload=offload(self.store), on_sent=sent)

    async def aplan(self, parts: RequestParts, canonical: Canonical) -> Plan:
        """`plan` for an async client. Where the store is on a server, it is made on a store
        thread, so the lookup of the recording (and a replayed reply's further frame pages,
        `Exchanges.frames`) never holds the loop; the calls of one loop are planned one at a
        time in their order of arrival, each claiming the occurrence it would claim there. On
        LMDB, in place."""
        store = self.store
        if not store.remote:
            return self.plan(parts, canonical)
        loop = asyncio.get_running_loop()
        if self._planning is None or self._planning[0] is not loop:
            self._planning = (loop, asyncio.Lock())
        async with self._planning[1]:
            return await acall(store, self.plan, parts, canonical)

    @property
    def replay_sent(self) -> Callable[[bytes], Replay | None] | None:
        """`_replay_sent` where it may answer: a mode that replays (not a block entered empty in
        mode once, which records everything), over a store whose sent index has entries (looked
        at once per block, and once for the proxy's life); else None, and requests are
        canonicalised at once, without a digest."""
        if self._finds_sent is None:
            self._finds_sent = self.mode not in ("all", "verify") and self.exchanges.finds_sent()
            self._sent_waits = self.store.remote
        if not self._finds_sent:
            return None
        if self._sent_waits and _on_a_loop():
            return None  # its read would hold an async client's loop: `aplan` reads instead
        return self._replay_sent

    def _replay_sent(self, sent: bytes) -> Replay | None:
        """The replay of a request recorded before but new to this process, found by its sent
        digest `sent` (`journal/sent_index.py`) without canonicalising it: the same record `plan`
        would replay, under the same occurrence. None when that is not known at once (no index
        entry, no record for this occurrence): then `plan` decides, as always."""
        exchanges = self.exchanges
        if self._pending is not None and self._pending.holds_sent(sent):
            self._pending.fold()
        claimed: list[tuple[str, int]] = []

        def key_for(fingerprint: bytes) -> bytes:
            digest = fingerprint.hex()
            with self._lock:
                occurrence = self._seen.get(digest, 0)
                self._seen[digest] = occurrence + 1
            claimed.append((digest, occurrence))
            return self._prefix + fingerprint + _U32.pack(occurrence)

        found = exchanges.find_sent(sent, key_for)
        if found is None:
            if claimed:
                digest, occurrence = claimed[0]
                with self._lock:  # nothing was consumed: `plan` claims the occurrence again
                    self._seen[digest] = occurrence
            return None
        with self._lock:
            self.stats.sent_hits += 1
        return self._replayed(*found)

    def _replayed(self, key: bytes, record: ExchangeRecord, first_page: bytes) -> Replay:
        with self._lock:
            stats = self.stats
            stats.replayed += 1
            stats.used.add(key)
        frame_ms = record.extra.get("frame_ms") if record.extra else None
        return Replay(
            record.status, record.headers, self.exchanges.frames(record, first_page), frame_ms
        )

    def _recorder(
        self, key: bytes, parts: RequestParts, canonical: Canonical, made: list[RequestSide]
    ) -> Callable[[Reply], None]:
        def ahead_of_file(txn: Txn, record: ExchangeRecord) -> None:
            """In the recording's own commit: it is in the store, not yet in the file."""
            file_ahead.note(txn, self.store.meta_db, [key])

        def commit(reply: Reply) -> None:
            try:
                pending_log = self._pending_log()  # made on first use: the disk may be full
                record_exchange(
                    self.exchanges,
                    key,
                    parts,
                    canonical,
                    reply,
                    namespace=self.name,
                    index_sent=True,
                    pending=pending_log,
                    also=ahead_of_file if pending_log is None and self.path else None,
                    request=made[0] if made else None,
                )
            except (PayloadTooLarge, StoreError) as exc:
                if reply.streamed:
                    raise  # read as the caller iterates, outside the SDK's retry loop
                # A plain body is read inside the SDK's send and retry loop (openai 2.x,
                # anthropic), which would send the paid request again: a reply too large, or
                # a store that could not commit it (a full disk), is carried out as a
                # `JournalRefusal` and raised as itself when the block exits.
                raise RecordRefused(exc) from exc
            with self._lock:
                if key not in self.stats.used:
                    self.stats.recorded += 1
                self.stats.used.add(key)

        return commit

    def _pending_log(self) -> PendingLog | None:
        """Where this block's next recording goes: its pending log (`pending.goes_to_log`), or
        None (straight into the store; always outside a block)."""
        now = time.monotonic()
        with self._lock:
            self._committed += 1
            previous, self._last_recorded = self._last_recorded, now
            if not self._in_block or not pending.goes_to_log(self._committed, now - previous):
                return None
            if self._pending is None:
                self._pending = pending.for_exchanges(self.exchanges)
                if self._pending is not None and self.path is not None:
                    self._pending.for_file(self.name)
            return self._pending

    def _verifier(
        self, record: ExchangeRecord, first_page: bytes, canonical: Canonical
    ) -> Callable[[Reply], None]:
        slot: list[int] = []  # where this call's result sits in the report

        def check(reply: Reply) -> None:
            # Called again when a stream's tail (OpenAI's `[DONE]`) arrives after its terminal
            # frame: the call's one result is replaced by the one over the whole reply.
            recorded = self.exchanges.body(record, first_page)
            result = compare_replies(
                canonical.surface,
                record.status,
                recorded,
                reply.status,
                b"".join(reply.frames),
                streamed=record.streamed if record.streamed == reply.streamed else None,
            )
            result.record_id = record.id
            with self._lock:
                if slot:
                    self.verify_report[slot[0]] = result
                else:
                    slot.append(len(self.verify_report))
                    self.verify_report.append(result)

        return check

    def _miss(self, parts: RequestParts, canonical: Canonical, occurrence: int) -> ReplayMiss:
        if self._pending is not None:  # what the block recorded, in the store to compare with
            self._pending.fold()
        fixes = (self.repeat_fix, self.unrecorded_fix, self.miss_fix)
        return explain_miss(self.exchanges, self.name, parts, canonical, occurrence, fixes)

    def prune(self, keys: Iterable[bytes]) -> int:
        """Delete these recordings of this cassette (its file too); return how many went."""
        removed = self.exchanges.delete(keys)
        if removed and self.path is not None:
            cassette_file.save(self.store, self.name, self.path)
        return removed

    # -- activation ------------------------------------------------------------------------------

    def __enter__(self) -> Cassette:
        self._seen.clear()
        self._finds_sent = None
        self.stats = CassetteStats()
        self.verify_report = []
        self._deleted = 0
        self._committed = 0
        self._last_recorded = 0.0  # time.monotonic() of the last recording's commit
        pending.recover(self.exchanges, again=True)  # a stopped process's recordings first
        if self.path is not None:
            cassette_file.sync(self.store, self.name, self.path)
        prefix = namespace_prefix(self.name)
        self._had_records = (
            next(self.store.iter_prefix(self.store.exchanges_db, prefix), None) is not None
        )
        if self.mode == "once" and not self._had_records:
            # Everything is recorded: a request's sent digest could only find what `plan`'s own
            # read finds (a recording another writer made meanwhile), so it is not computed.
            self._finds_sent = False
        if self.mode == "none":
            netguard.block(self._allow_hosts)
        self._in_block = True
        self._token = push_session(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        pop_session(self, self._token)
        self._in_block = False
        if self.mode == "none":
            netguard.unblock()
        if self._pending is not None:  # its recordings into the store (kept on disk if that fails)
            log, self._pending = self._pending, None
            pending.release(log)
        if self.mode == "all" and exc_type is None and self.drops_stale:
            # Everything was re-recorded: what this pass did not touch is stale.
            stale = [
                key
                for key, _ in self.exchanges.scan(namespace_prefix(self.name))
                if key not in self.stats.used
            ]
            if stale:
                self._deleted += self.exchanges.delete(stale)
        if self.path is not None and (self.stats.recorded or self._deleted):
            # Whatever the cache took in, the file holds too (even when the block failed: the
            # cache must not hold more than its file).
            cassette_file.save(self.store, self.name, self.path)
        if isinstance(exc, RecordRefused):
            raise exc.error from None  # out of the SDK call: the refusal as itself
        if self.mode == "verify":
            drifted = [r for r in self.verify_report if not r.matches]
            if drifted:
                warnings.warn(
                    f"cassette {self.name!r}: {len(drifted)} of {len(self.verify_report)} "
                    "replies no longer match their recording:\n"
                    + "\n".join(r.describe() for r in drifted),
                    VerifyMismatch,
                    stacklevel=2,
                )

    async def __aenter__(self) -> Cassette:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __call__(self, fn: F) -> F:
        """Use the cassette as a decorator on a sync or async function."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await fn(*args, **kwargs)

            return cast(F, run_async)

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return cast(F, run)


def cassette(
    name: str,
    mode: Mode = "once",
    *,
    store: Store | str | os.PathLike[str] | None = None,
    allow_hosts: Iterable[str] = (),
    path: str | os.PathLike[str] | None = None,
) -> Cassette:
    """Record or replay the model calls made inside a block (context manager or decorator).

    With `path` the cassette is a text file (commit it); the store is then only its cache."""
    return Cassette(name, mode, store=store, allow_hosts=allow_hosts, path=path)


_MISS_FIX = (
    "Re-record with mode='new_episodes' (pytest: --pyrula-record-mode=new_episodes) if "
    "the change is intended."
)


_UNRECORDED_FIX = "Record it with mode='once' (pytest: --pyrula-record-mode=once)."


__all__ = ["MODES", "Cassette", "Mode", "VerifyMismatch", "cassette"]


def _on_a_loop() -> bool:
    """Whether this runs on an event loop's thread (a store thread `aplan` waits on has none)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
