"""A full disk under the proxy: it keeps answering, warns once per condition (not once per
exchange), and each reply's head says the exchange is not being recorded."""

from __future__ import annotations

import logging

import httpx
import pytest

from pyrula.errors import StoreFull
from pyrula.journal.lmdb_store import LmdbStore
from tests.proxy.support import KEY, routes_to, running

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def disk(monkeypatch):
    """A switch that makes every commit of a recorded exchange fail as a full disk does."""
    state = {"full": False}
    write = LmdbStore.write

    def maybe_full(self, fn, **scope):
        if state["full"] and fn.__qualname__.startswith("Exchanges.put"):
            raise StoreFull(self.path, 0, "mdb_txn_commit: No space left on device")
        return write(self, fn, **scope)

    monkeypatch.setattr(LmdbStore, "write", maybe_full)
    return state


def test_a_full_disk_is_one_warning_and_a_header_on_each_reply(store, standin, disk, caplog):
    caplog.set_level(logging.WARNING, logger="pyrula.proxy")
    with running(store, "record", routes=routes_to(standin.url)) as proxy:
        url = proxy.base_url("openai") + "/v1/chat/completions"
        auth = {"authorization": f"Bearer {KEY}"}

        def ask(n: int) -> httpx.Response:
            body = {**BODY, "messages": [{"role": "user", "content": f"hi {n}"}]}
            return httpx.post(url, json=body, headers=auth, timeout=30)

        disk["full"] = True
        replies = [ask(n) for n in range(3)]
        disk["full"] = False
        after = [ask(n) for n in range(3, 5)]
    assert [r.status_code for r in replies + after] == [200] * 5
    # The first reply's head was out before its commit failed; the next ones say so.
    assert [("x-pyrula-not-recorded" in r.headers) for r in replies] == [False, True, True]
    assert "StoreFull" in replies[1].headers["x-pyrula-not-recorded"]
    # The first commit after space came back succeeds and ends the condition.
    assert [("x-pyrula-not-recorded" in r.headers) for r in after] == [True, False]
    warnings = [r.getMessage() for r in caplog.records if r.name == "pyrula.proxy"]
    assert sum("not being recorded" in w for w in warnings) == 1
    assert sum("recording again" in w for w in warnings) == 1
    # Only the proxy's own records: an SDK client another test left to the garbage collector
    # can log its loop's closing here, and that is not the proxy's doing.
    proxy_records = [r for r in caplog.records if r.name.startswith("pyrula")]
    assert not any(r.exc_info or "Traceback" in r.getMessage() for r in proxy_records)
