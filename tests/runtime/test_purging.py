"""Purging at scale on PostgreSQL: ended runs go in batches scoped to each run, so claims and
other runs' writes go on while a purge is under way, and the purge's end state is exact.

Here a purge of many ended runs is held mid-way: another session holds the locks of a write of
one of them (`tests.fakes.postgres.HeldStore`), as that run's writer in the middle of a write
would, and the purge waits there, the runs before it already gone. Meanwhile another worker's
claim of a queued run completes. (An unscoped write would wait for every write in flight, and
every claim would wait behind it.) The LMDB behaviour is tests/runtime/test_retention.py's.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from pyrula.runtime.retention import Purged, purge
from pyrula.workflows import WorkflowContext, workflow
from tests.fakes.clock import wait_until
from tests.fakes.postgres import HeldStore, fresh_url
from tests.runtime.support import ask, async_openai, chat_upstream, drive

UPSTREAM = chat_upstream()
OLD = 8  # ended runs past their retention


@workflow(name="purged_work")
async def purged_work(ctx: WorkflowContext, n: int) -> str:
    for i in range(n):
        await ctx.step(f"step{i}", lambda i=i: i)
    return await ask(async_openai(UPSTREAM), f"call {n}")


@workflow(name="purged_waits")
async def purged_waits(ctx: WorkflowContext) -> str:
    return str(await ctx.interrupt("go?"))


def _rows(store: Store) -> dict[str, int]:
    counts = store.stat()["entries"]
    return {name: counts.get(name, 0) for name in ("runs", "events", "exchanges", "withheld")}


def test_a_purge_of_many_ended_runs_never_holds_up_a_claim_and_deletes_exactly_them():
    store = Store(fresh_url())
    other = Store(store.url)  # another worker's own sessions
    try:
        journal = RunStore(store)
        old = [
            submit(purged_work, i + 1, store=store, idempotency_key=f"old-{i}", capture="metadata")
            for i in range(OLD)
        ]
        drive(store)
        cutoff = time.time()
        while time.time() <= cutoff:  # the kept runs end strictly after the cutoff
            pass
        kept_done = submit(purged_work, 2, store=store, idempotency_key="kept")
        parked = submit(purged_waits, store=store)
        drive(store)
        queued = submit(purged_work, 1, store=store)  # no worker runs: it stays queued
        order = [run.id for run in journal.ended_before(cutoff)]
        assert sorted(order) == sorted(h.id for h in old)
        kept = {h.id: (journal.get(h.id), journal.events(h.id)) for h in (kept_done, parked)}
        before = _rows(store)
        old_events = sum(len(journal.events(run_id)) for run_id in order)

        # The purge (oldest first) waits at the middle run, held by a writer of that run.
        held = HeldStore(store.url, scope=order[OLD // 2])
        done: list[Purged] = []
        purging = threading.Thread(
            target=lambda: done.append(purge(journal, 0, now=cutoff)), daemon=True
        )
        purging.start()
        claimed: list[Any] = []
        try:
            wait_until(lambda: held.waiting() > 0, "the purge to wait at the held run")
            assert journal.find(order[0]) is None  # mid-way: the first runs are gone already
            assert journal.find(order[-1]) is not None
            # Meanwhile: another worker submits and claims; neither waits for the purge.
            fresh = submit(purged_work, 1, store=other)
            claiming = threading.Thread(
                target=lambda: claimed.append(RunStore(other).claim("w2", ttl=60)), daemon=True
            )
            claiming.start()
            claiming.join(timeout=30)  # a hang guard: the claim does not wait on the purge
            assert not claiming.is_alive(), "the claim waited behind the purge"
            assert held.waiting() > 0 and purging.is_alive()  # the purge is still held
        finally:
            held.release()
        purging.join(timeout=60)
        assert not purging.is_alive()

        assert claimed[0] is not None and claimed[0].id in {queued.id, fresh.id}
        assert claimed[0].status == "running" and claimed[0].lease["worker"] == "w2"
        # Exactly the old runs went, with their events, exchanges and withheld values.
        assert sorted(run.id for run in done[0].runs) == sorted(order)
        for run_id in order:
            assert journal.find(run_id) is None and journal.events(run_id) == []
        after = _rows(store)
        assert after["runs"] == before["runs"] - OLD + 1  # the fresh run is new
        assert after["exchanges"] == before["exchanges"] - OLD  # one model call each
        assert after["withheld"] == 0 < before["withheld"]  # only the old runs withheld any
        assert after["events"] == before["events"] - old_events + 1  # the fresh run's first
        # Nothing of a live run was touched; the tokens of purged runs still attach.
        for run_id, (record, events) in kept.items():
            assert (journal.get(run_id), journal.events(run_id)) == (record, events)
        again = submit(purged_work, 1, store=store, idempotency_key="old-0")
        assert (again.id, again.created) == (old[0].id, False)
    finally:
        other.close()
        store.close()
