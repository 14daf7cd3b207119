"""Claiming runs (`RunLeases.claim_many`): a worker takes as many runs as it has room for in one
write, and passes over a run another write holds instead of waiting for it."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pyrula.journal import Store
from pyrula.runtime import RunStore
from pyrula.runtime.records import RUNNING
from pyrula.runtime.run_leases import BUSY_RETRY_SECONDS
from tests.fakes.postgres import HeldStore, fresh_url


def test_a_claim_takes_up_to_its_limit_and_each_run_once(store_location):
    with Store(store_location) as store:
        journal = RunStore(store)
        submitted = {journal.submit("claimed_work", {"n": n})[0].id for n in range(5)}
        first = journal.claim_many("w1", 60, {"claimed_work"}, 3)
        second = journal.claim_many("w2", 60, {"claimed_work"}, 3)
        assert len(first) == 3 and len(second) == 2
        assert {run.id for run in first + second} == submitted
        assert journal.claim_many("w3", 60, {"claimed_work"}, 3) == []
        for run in first + second:
            record = journal.get(run.id)
            assert record is not None and record.status == RUNNING and record.attempt == 1
            assert record.lease is not None
            assert record.lease["worker"] == ("w1" if run in first else "w2")


def test_a_claim_passes_over_a_run_another_write_holds_and_looks_again_soon():
    url = fresh_url()
    with Store(url) as store:
        journal = RunStore(store)
        held_run = journal.submit("held_work", {})[0].id
        free_run = journal.submit("held_work", {})[0].id
        held = HeldStore(url, scope=held_run)  # its writer mid-write (a cancel, say)
        try:
            with ThreadPoolExecutor(max_workers=1) as claimer:
                claimed = claimer.submit(journal.claim_many, "w1", 60, {"held_work"}, 2)
                # Answered while the other write is still open (waiting would take both).
                assert [run.id for run in claimed.result(60)] == [free_run]
            assert journal.next_due is not None
            assert journal.next_due <= time.time() + BUSY_RETRY_SECONDS
        finally:
            held.release()
        again = journal.claim_many("w1", 60, {"held_work"}, 2)
        assert [run.id for run in again] == [held_run]


@pytest.mark.parametrize("limit", [1, 4])
def test_racing_claimers_take_each_run_exactly_once(store_location, limit):
    with Store(store_location) as store:
        journal = RunStore(store)
        submitted = {journal.submit("raced_work", {"n": n})[0].id for n in range(24)}

        def claimer(name: str) -> list[str]:
            mine: list[str] = []
            with Store(store_location) as own:
                runs = RunStore(own)
                while taken := runs.claim_many(name, 60, {"raced_work"}, limit):
                    mine += [run.id for run in taken]
            return mine

        with ThreadPoolExecutor(max_workers=4) as pool:
            claimed = [run for got in pool.map(claimer, ["a", "b", "c", "d"]) for run in got]
        assert sorted(claimed) == sorted(submitted)
