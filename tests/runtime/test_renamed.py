"""The `RunStore` is `run_store` on a run handle, a worker and an attempt; the old name
`journal` still reads it for one release, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from pyrula.journal.store import open_store
from pyrula.runtime import RunStore, Worker, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.runtime.support import drive

SEEN: dict[str, Any] = {}


@workflow(name="renamed_reads_its_run_store")
async def renamed_reads_its_run_store(ctx: WorkflowContext) -> str:
    attempt = ctx._attempt
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SEEN["attempt"] = (attempt.journal, attempt.run_store)
    SEEN["warned"] = [(w.category, str(w.message)) for w in caught]
    return "done"


def test_the_run_store_is_run_store_and_journal_warns_on_each(tmp_path: Any) -> None:
    store = open_store(tmp_path / "store")
    try:
        handle = submit(renamed_reads_its_run_store, store=store)
        assert isinstance(handle.run_store, RunStore) and handle.run_store.store is store
        renamed = r"RunHandle\.journal .*use RunHandle\.run_store"
        with pytest.warns(DeprecationWarning, match=renamed):
            assert handle.journal is handle.run_store
        worker = Worker(store)
        assert isinstance(worker.run_store, RunStore) and worker.store is store
        with pytest.warns(DeprecationWarning, match=r"Worker\.journal .*use Worker\.run_store"):
            assert worker.journal is worker.run_store
        drive(store)
        assert handle.record.status == "completed"
        old, new = SEEN["attempt"]
        assert old is new and isinstance(new, RunStore) and new.store is store
        [(category, message)] = SEEN["warned"]
        assert category is DeprecationWarning
        assert "Attempt.journal is deprecated" in message and "use Attempt.run_store" in message
    finally:
        store.close()
