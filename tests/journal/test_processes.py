"""Several processes recording into one store at once lose and mix nothing."""

from __future__ import annotations

import multiprocessing

import pytest

import pyrula
from pyrula.journal import Exchanges, Store
from tests.journal import _worker

WORKERS = 3
CALLS = 30


@pytest.mark.slow
def test_concurrent_processes_record_into_one_store(store_path):
    Store(store_path).close()
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_worker.record, args=(str(store_path), w, CALLS))
        for w in range(WORKERS)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=180)
    assert [p.exitcode for p in workers] == [0] * WORKERS, "a recording process failed"
    with Store(store_path) as store:
        assert sum(1 for _ in Exchanges(store).scan()) == WORKERS * CALLS
    sdk = _worker.client()
    with pyrula.cassette("shared", mode="none", store=store_path):
        for w in range(WORKERS):
            for i in range(CALLS):
                assert _worker.ask(sdk, f"w{w}-q{i}") == f"answer to w{w}-q{i}"
