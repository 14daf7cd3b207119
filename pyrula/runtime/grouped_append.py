"""Journaling a fact through the worker's group commit, in one statement where it can be.

A fact is appended to its run's events under the next sequence number, fenced on the attempt's
lease, with what it withholds (below the io capture level) in the same commit. `RunStore.append`
reads the lease and the run's last event, then writes: three statements, two of them waits for
an answer. The attempt knows the sequence number its next fact should take (it has read or
written every event before it), so the fast form sends one `Txn.put_fenced` instead: the event
added only if its key is new, the event before it exists and the lease is still held. Within a
group commit (`journal.group_commit`) the fast forms of every run's fact go out together and
come back in one round trip. When the guess was stale (someone else appended to the run) or
the lease moved, the fast form adds nothing and the full `append` runs in the same transaction,
so a lost lease still raises `RunAttemptEnded` and a fact is never written twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pyrula.journal.group_commit import MISSED, group_commit
from pyrula.journal.store import Txn
from pyrula.runtime.leases import lease_key, lease_value
from pyrula.runtime.records import Event, Lease, dump_json, event_key
from pyrula.runtime.runstore import RunStore
from pyrula.runtime.withheld import withheld_key


async def append_grouped(
    journal: RunStore,
    run_id: str,
    lease: Lease | None,
    kind: str,
    payload: dict[str, Any],
    *,
    next_seq: int | None = None,
    withheld: dict[str, Any] | None = None,
) -> Event:
    """`journal.append`, group-committed; `next_seq`, when known, is tried first (fast form)."""
    full = journal.fenced_append(run_id, lease, kind, payload, withheld)
    fast = None
    if next_seq is not None:
        fast = _fast_append(journal, run_id, lease, kind, payload, withheld, next_seq)
    # Scoped to its run: a group of facts locks only its runs (docs/scaling.md, "Group commit").
    return await group_commit(journal.store).write(full, fast=fast, scope=run_id)


def _fast_append(
    journal: RunStore,
    run_id: str,
    lease: Lease | None,
    kind: str,
    payload: dict[str, Any],
    withheld: dict[str, Any] | None,
    seq: int,
) -> Callable[[Txn], Callable[[], Any]]:
    store = journal.store
    event = Event(seq, kind, time.time(), payload)
    value = dump_json(event.to_json())
    events = store.db("events")
    after = event_key(run_id, seq - 1) if seq > 1 else None
    fence = None
    if lease is not None:
        fence = (lease_key(run_id), lease_value(lease.worker, lease.attempt), store.db("flags"))
    also = []
    if withheld is not None:
        key = withheld_key(run_id, str(payload["position"]))
        also.append((key, dump_json(withheld), store.db("withheld")))

    def send(txn: Txn) -> Callable[[], Any]:
        added = txn.put_fenced(
            event_key(run_id, seq), value, db=events, after=after, fence=fence, also=also
        )
        return lambda: event if added() else MISSED

    return send
