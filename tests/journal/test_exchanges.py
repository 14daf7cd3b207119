"""`Exchanges.copy`: a forked run's name for an exchange another run recorded."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pyrula.journal import Exchange, Exchanges, Store
from pyrula.journal.exchanges import PAGE_BYTES, ExchangeRecord, copied_from
from pyrula.journal.keys import run_key

SOURCE = run_key("run_source", "run", 0)
FORK = run_key("run_fork", "run", 0)
FORK_OF_FORK = run_key("run_fork2", "run", 0)
# A streamed reply bigger than a page: its frames live in further pages, shared by the copies.
FRAMES = [f"data: {i:05d} {'x' * 1000}\n\n".encode() for i in range(3 * PAGE_BYTES // 1000)]


def _recorded(store: Store) -> Exchanges:
    exchanges = Exchanges(store)
    exchanges.put(
        SOURCE,
        Exchange(
            request_doc={"surface": "generic", "compared": {"q": "hello"}, "meta": {}},
            surface="generic",
            fingerprint=hashlib.sha256(b"hello").hexdigest(),
            method="POST",
            url="http://x.test/v1",
            status=200,
            headers=[("content-type", "text/event-stream")],
            frames=FRAMES,
            streamed=True,
            elapsed_ms=3.0,
        ),
    )
    return exchanges


def _record(exchanges: Exchanges, key: bytes) -> ExchangeRecord:
    found = exchanges.get(key)
    assert found is not None
    return found[0]


def _frames(exchanges: Exchanges, key: bytes) -> list[bytes]:
    found = exchanges.get(key)
    assert found is not None
    return list(exchanges.frames(*found))


def test_a_copy_names_the_key_its_exchange_was_recorded_under(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as store:
        exchanges = _recorded(store)
        assert exchanges.copy(SOURCE, FORK) and exchanges.copy(FORK, FORK_OF_FORK)
        assert not exchanges.copy(run_key("run_gone", "run", 0), run_key("run_x", "run", 0))

        original, copy, second = (_record(exchanges, k) for k in (SOURCE, FORK, FORK_OF_FORK))
        assert original.pages > 1
        assert copied_from(original) is None
        # A copy of a copy still names where the exchange was recorded.
        assert copied_from(copy) == copied_from(second) == SOURCE
        assert copy.id == second.id == original.id
        assert _frames(exchanges, FORK_OF_FORK) == FRAMES


def test_deleting_a_copy_leaves_the_exchange_its_frames(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as store:
        exchanges = _recorded(store)
        exchanges.copy(SOURCE, FORK)

        assert exchanges.delete([FORK]) == 1

        assert exchanges.get(FORK) is None
        assert _frames(exchanges, SOURCE) == FRAMES
