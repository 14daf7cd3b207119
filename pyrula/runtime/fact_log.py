"""A run's facts made durable by one append to a log while its worker executes it alone, and
put in the store in batches.

A journaled step is one LMDB commit: two device flushes over pages scattered across its B-trees,
which on most disks is most of what a step costs. While a worker executes one run at a time on
a local store that flushes its commits, that run's facts after its first `DIRECT_FACTS` are
instead appended to this process's fact log (`<store>/facts/<pid>-<random>.log`, an
`append_log.AppendLog`): one write and one flush of contiguous bytes, after which the fact is on
disk and the body goes on, exactly as after a commit. The facts are put in the store in one
transaction `FOLD_SECONDS` after the first of them (a timer), after `FOLD_EVERY` of them, and
before any other write of the attempt (its closing event, a fact of a sync call, a fact while
other runs execute too), so a run's events are always in the store in order.

The lease is checked when the facts are put in the store, fact by fact, as a commit checks it: a
fact whose attempt no longer holds its run's lease is dropped, and the attempt's next write
raises `RunAttemptEnded`. So that a live worker never logs past its lease, an attempt logs only
while its lease has `LEASE_MARGIN` seconds left; nearer the end it commits each fact, fenced.
A worker that dies leaves its log; whoever takes one of its runs over (`RunStore.claim`), or
opens the store's runs, first puts the log's facts in the store (`recover`); a fact the store
holds already (a batch committed just before its process died, its log not yet restarted) is
not put twice.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyrula.errors import StoreError
from pyrula.journal.append_log import (
    BatchLog,
    FieldReader,
    LogRegistry,
    every_log,
    field,
    folder_for,
    stopped_logs,
)
from pyrula.journal.store import Store, Txn
from pyrula.runtime.leases import lease_key
from pyrula.runtime.records import Event, dump_json, event_key, next_seq
from pyrula.runtime.withheld import withheld_key

# How many of an attempt's first facts are committed rather than logged: none, since a run's
# logged facts go into the store with its closing event, in its commit.
DIRECT_FACTS = 0
FOLD_EVERY = 1024
FOLD_BYTES = 8 << 20
# Facts wait at most about this long to be seen by other processes (`pyrula runs show`).
FOLD_SECONDS = 1.0
# An attempt logs a fact only while its lease has this long left (its facts are put in the store,
# and their fence checked, well before it could lapse).
LEASE_MARGIN = 3 * FOLD_SECONDS
_MAGIC = b"PYRFACT1"

log = logging.getLogger("pyrula.runtime")


@dataclass(frozen=True, slots=True)
class LoggedFact:
    """One fact of an attempt, as the log keeps it: its run, the lease it was written under, the
    event and what it withholds, both as the store keeps them."""

    run_id: str
    lease: bytes  # `leases.lease_value(worker, attempt)`
    event: Event
    value: bytes  # the event as stored
    withheld: bytes | None  # at the event's position, as stored

    @classmethod
    def of(
        cls, run_id: str, lease: bytes, event: Event, withheld: dict[str, Any] | None
    ) -> LoggedFact:
        kept = None if withheld is None else dump_json(withheld)
        return cls(run_id, lease, event, dump_json(event.to_json()), kept)

    def encode(self) -> bytes:
        parts = [field(self.run_id.encode()), field(self.lease), field(self.value)]
        parts.append(b"\x00" if self.withheld is None else b"\x01" + field(self.withheld))
        return b"".join(parts)

    @classmethod
    def decode(cls, payload: bytes) -> LoggedFact:
        reader = FieldReader(payload)
        run_id, lease, value = reader.field().decode(), reader.field(), reader.field()
        kept = payload[reader.at : reader.at + 1]
        reader.at += 1
        withheld = reader.field() if kept == b"\x01" else None
        return cls(run_id, lease, Event.from_json(json.loads(value)), value, withheld)


class FactLog(BatchLog):
    """This process's logged facts for one store (`for_store`): thread-safe."""

    noun = "run facts"

    def __init__(self, store: Store, folder: Path) -> None:
        super().__init__(folder, _MAGIC, "fact log", lambda: FOLD_SECONDS)
        self.store = store
        self._facts: list[LoggedFact] = []
        self._runs: set[str] = set()  # the runs of `_facts`
        # (run, lease) of attempts whose facts a fold found fenced out: they have ended.
        self._refused: set[tuple[str, bytes]] = set()

    def holds(self, run_id: str) -> bool:
        """Whether facts of `run_id` wait here (the store does not have them yet)."""
        return run_id in self._runs

    def refused(self, run_id: str, lease: bytes) -> bool:
        """Whether a fold found that this attempt no longer held its run's lease."""
        return (run_id, lease) in self._refused

    def append(self, fact: LoggedFact) -> None:
        """Make `fact` durable (one write and one flush) before returning."""
        self._append(fact, fact.encode(), FOLD_EVERY, FOLD_BYTES)

    def _keep(self, fact: LoggedFact) -> int:
        self._facts.append(fact)
        self._runs.add(fact.run_id)
        return len(self._facts)

    def fold(self) -> int:
        """Put every logged fact in the store in one transaction; return how many were taken.
        If the write fails, the facts stay here (and on disk) and the error is raised."""
        with self.folding() as put:
            if not self._facts or self._closed:
                return 0
            count = len(self._facts)
            self.store.write(put)
        return count

    @contextmanager
    def folding(self) -> Iterator[Callable[[Txn], None]]:
        """For a write that should carry the logged facts: yields what to call inside its
        transaction (it puts them in, first); once the block ends without an error (the write
        committed), they leave the log. The log is locked meanwhile."""
        with self._lock:
            facts = [] if self._closed else self._facts
            taken: list[set[tuple[str, bytes]]] = []

            def put(txn: Txn) -> None:
                taken[:] = [_put_in_store(self.store, txn, facts)] if facts else []

            yield put
            if taken:
                self._refused |= taken[0]
                self._facts, self._runs = [], set()
                self._emptied()


def _put_in_store(store: Store, txn: Txn, facts: Iterable[LoggedFact]) -> set[tuple[str, bytes]]:
    """Write `facts` as their attempts' commits would have, in order, each once (a log replayed
    after a crash between its batch's commit and its restart holds facts the store has); return
    the (run, lease) of the attempts fenced out."""
    flags, events, withheld = store.db("flags"), store.db("events"), store.db("withheld")
    refused: set[tuple[str, bytes]] = set()
    fenced: set[tuple[str, bytes]] = set()  # checked in this transaction: it cannot move
    last: dict[str, int] = {}  # run -> the number its fact before took, here
    for fact in facts:
        run_id, held = fact.run_id, (fact.run_id, fact.lease)
        if held in refused:
            continue
        if held not in fenced:
            lease = txn.get(lease_key(run_id), db=flags)
            if lease is None or bytes(lease) != fact.lease:
                refused.add(held)  # taken over or terminated: the new owner does this work
                continue
            fenced.add(held)
        seq, value = fact.event.seq, fact.value
        found = txn.get(event_key(run_id, seq), db=events)
        if found is not None and bytes(found) == value:
            last[run_id] = seq
            continue  # in the store already
        gap = (
            seq > 1
            and last.get(run_id) != seq - 1
            and txn.get(event_key(run_id, seq - 1), db=events) is None
        )
        if found is not None or gap:
            # An outside fact (a signal) took its place: it goes after the run's last event,
            # unless a batch before put it there already.
            seq = _after_last(txn, events, fact)
            if seq == 0:
                continue
            value = dump_json(Event(seq, *_rest(fact.event)).to_json())
        txn.put(event_key(run_id, seq), value, db=events)
        last[run_id] = seq
        if fact.withheld is not None:
            position = str(fact.event.payload["position"])
            txn.put(withheld_key(run_id, position), fact.withheld, db=withheld)
    return refused


def _rest(event: Event) -> tuple[str, float, dict[str, Any]]:
    return event.type, event.at, event.payload


def _after_last(txn: Txn, events: Any, fact: LoggedFact) -> int:
    """The sequence number after the run's last event, or 0 when an event past the fact's own
    number is this fact already (put there by an earlier batch)."""
    prefix = fact.run_id.encode() + b"\x00"
    for _key, value in txn.scan(events, prefix, start=event_key(fact.run_id, fact.event.seq)):
        if _rest(Event.from_json(json.loads(value))) == _rest(fact.event):
            return 0
    return next_seq(txn, events, fact.run_id)


_logs: LogRegistry[FactLog] = LogRegistry()


def folder_of(store: Store) -> Path | None:
    """Where `store` keeps fact logs (`append_log.folder_for`)."""
    return folder_for(store, "facts")


def for_store(store: Store) -> FactLog | None:
    """This process's fact log for `store`, made on first use and counted as one more user
    (`release`); None where facts are committed straight away (`folder_of`)."""
    folder = folder_of(store)
    if folder is None:
        return None
    return _logs.use(folder, lambda: FactLog(store, folder), lambda found: found.store.closed)


@contextmanager
def kept_open(store: Store) -> Iterator[None]:
    """Keep this process's fact log for `store` open while the block lasts (a worker's life),
    from one attempt to the next: a file made once, not once per run."""
    folder = folder_of(store)
    if folder is None:
        yield
        return
    _logs.pin(folder)
    try:
        yield
    finally:
        _logs.unpin(folder)


def release(facts: FactLog) -> None:
    """An attempt is done with `facts`: fold them; the last user also deletes the file."""
    _logs.release(facts)


def recover(store: Store, *, again: bool = True, quiet: bool = False) -> int:
    """Put in the store the facts logged for `store` by this process and by processes that
    stopped (once per opening of the store unless `again`); return how many were put. A store
    that cannot take them (a full disk) raises, or with `quiet` logs it: they stay on disk for
    the next opener, and whoever takes one of their runs over puts them in first."""
    if not quiet:
        return _recover(store, again)
    try:
        return _recover(store, again)
    except StoreError as exc:
        log.warning("run facts logged by a stopped worker wait in %s: %s", store.location, exc)
        return 0


def _recover(store: Store, again: bool) -> int:
    folder = folder_of(store)
    if folder is None or not (_logs.first_opening(folder, store) or again):
        return 0
    own = _logs.current(folder)
    put = 0
    if own is not None and own.pid == os.getpid() and not own.store.closed:
        put += own.fold()
    if not folder.is_dir():
        return put
    for path, payloads in stopped_logs(folder, _MAGIC):
        put += _recover_one(store, path, payloads)
    return put


def _decoded(payloads: Iterable[bytes]) -> Iterator[LoggedFact]:
    """The facts of a log's payloads, up to the first that does not decode (a foreign tail)."""
    for payload in payloads:
        try:
            yield LoggedFact.decode(payload)
        except (ValueError, KeyError, TypeError, struct.error):
            return


def _recover_one(store: Store, path: Path, payloads: list[bytes]) -> int:
    facts = list(_decoded(payloads))
    if not facts:
        return 0
    refused = store.write(lambda txn: _put_in_store(store, txn, facts))
    kept = sum(1 for fact in facts if (fact.run_id, fact.lease) not in refused)
    log.warning(
        "took %d run fact(s) logged by a stopped process (%s) into %s",
        kept,
        path.name,
        store.location,
    )
    return kept


def read_logged(store_folder: Path) -> Iterator[LoggedFact]:
    """The facts the fact logs of the store in `store_folder` hold now, stopped processes' and
    live ones' alike, without putting them in the store (what `recover` would take)."""
    for payloads in every_log(Path(store_folder) / "facts", _MAGIC):
        yield from _decoded(payloads)


atexit.register(_logs.close_all)


__all__ = [
    "DIRECT_FACTS",
    "FOLD_EVERY",
    "FOLD_SECONDS",
    "LEASE_MARGIN",
    "FactLog",
    "LoggedFact",
    "folder_of",
    "for_store",
    "kept_open",
    "read_logged",
    "recover",
    "release",
]
