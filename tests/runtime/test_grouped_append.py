"""A fact journaled through the group commit's fast form (one fenced statement per fact, sent
together): the same events, sequence numbers and fence as `RunStore.append`, on both backends."""

from __future__ import annotations

import asyncio

import pytest

from pyrula.errors import RunAttemptEnded
from pyrula.journal import Store
from pyrula.runtime import RunStore
from pyrula.runtime.grouped_append import append_grouped
from pyrula.runtime.records import Lease


def _claimed(journal: RunStore, name: str) -> tuple[str, Lease]:
    run, _ = journal.submit(name, {})
    taken = journal.claim("w1", ttl=60, names={name})
    assert taken is not None and taken.id == run.id
    return run.id, Lease("w1", taken.attempt)


def test_facts_of_many_runs_grouped_land_in_order_once_each(store_location):
    with Store(store_location) as store:
        journal = RunStore(store)
        runs = [_claimed(journal, f"r{n}") for n in range(8)]
        firsts = {run_id: len(journal.events(run_id)) for run_id, _ in runs}
        withholding = {run_id for run_id, _ in runs[::2]}

        async def run_facts(run_id: str, lease: Lease) -> list[int]:
            seqs = []
            withholds = run_id in withholding  # half the runs: a second table in the group
            for index in range(20):
                event = await append_grouped(
                    journal,
                    run_id,
                    lease,
                    "step:done",
                    {"position": f"s{index}", "result": None if withholds else index},
                    next_seq=firsts[run_id] + index + 1,
                    withheld={"result": index} if withholds else None,
                )
                seqs.append(event.seq)
            return seqs

        async def main() -> list[list[int]]:
            return list(await asyncio.gather(*(run_facts(r, lease) for r, lease in runs)))

        acknowledged = asyncio.run(main())
        for (run_id, _), seqs in zip(runs, acknowledged, strict=True):
            events = journal.events(run_id)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            done = [e for e in events if e.type == "step:done"]
            if run_id in withholding:
                kept = [journal.withheld(run_id, e.payload["position"]) for e in done]
                assert [value["result"] for value in kept] == list(range(20))
            else:
                assert [e.payload["result"] for e in done] == list(range(20))
            assert [e.seq for e in done] == seqs


def test_two_facts_of_one_run_in_one_group_with_the_same_guess_take_consecutive_seqs(
    store_location,
):
    with Store(store_location) as store:
        journal = RunStore(store)
        run_id, lease = _claimed(journal, "twice")
        seq = len(journal.events(run_id)) + 1

        async def both() -> list[int]:
            facts = [
                append_grouped(journal, run_id, lease, "step:done", {"position": p}, next_seq=seq)
                for p in ("a", "b")
            ]
            return [event.seq for event in await asyncio.gather(*facts)]

        assert sorted(asyncio.run(both())) == [seq, seq + 1]
        events = journal.events(run_id)
        assert [e.seq for e in events] == list(range(1, seq + 2))
        assert sorted(e.payload["position"] for e in events[-2:]) == ["a", "b"]


@pytest.mark.parametrize("guess", ["behind", "ahead"])
def test_a_stale_guess_of_the_next_seq_still_appends_at_the_end(store_location, guess):
    with Store(store_location) as store:
        journal = RunStore(store)
        run_id, lease = _claimed(journal, "stale")
        known = len(journal.events(run_id))
        journal.append(run_id, None, "signal:received", {"name": "poke"})  # not seen by the guess
        next_seq = known + 1 if guess == "behind" else known + 5
        event = asyncio.run(
            append_grouped(
                journal, run_id, lease, "step:done", {"position": "a"}, next_seq=next_seq
            )
        )
        events = journal.events(run_id)
        assert event.seq == known + 2 == events[-1].seq
        assert [e.seq for e in events] == list(range(1, known + 3))
        assert [e.type for e in events[-2:]] == ["signal:received", "step:done"]


def test_a_fact_past_its_lease_is_refused_with_nothing_written(store_location):
    with Store(store_location) as store:
        journal = RunStore(store)
        run_id, lease = _claimed(journal, "fenced")
        before = journal.events(run_id)
        stale = Lease(lease.worker, lease.attempt + 1)  # another attempt holds the run now
        with pytest.raises(RunAttemptEnded):
            asyncio.run(
                append_grouped(
                    journal,
                    run_id,
                    stale,
                    "step:done",
                    {"position": "a", "result": None, "withheld": True},
                    next_seq=len(before) + 1,
                    withheld={"result": "secret"},
                )
            )
        assert journal.events(run_id) == before
        with pytest.raises(Exception, match="no withheld value"):
            journal.withheld(run_id, "a")


def test_what_a_fact_withholds_is_committed_with_it(store_location):
    with Store(store_location) as store:
        journal = RunStore(store)
        run_id, lease = _claimed(journal, "withheld")
        seq = len(journal.events(run_id)) + 1
        payload = {"position": "a", "result": None, "withheld": True}
        asyncio.run(
            append_grouped(
                journal, run_id, lease, "step:done", payload, next_seq=seq, withheld={"result": 7}
            )
        )
        assert journal.events(run_id)[-1].payload == payload
        assert journal.withheld(run_id, "a") == {"result": 7}
