"""A store whose commits fail as a full disk makes them (or as any other store error does),
for the tests of what is kept and what is refused then."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pyrula.errors import StoreError, StoreFull


def fail_writes(
    monkeypatch: pytest.MonkeyPatch,
    store: Any,
    *,
    where: str = "",
    times: int | None = None,
    error: Callable[[], StoreError] | None = None,
) -> list[str]:
    """Make `store.write` raise for the write functions whose `__qualname__` starts with `where`
    (`StoreFull`, as LMDB's commit on a full disk, unless `error` makes another), `times` times
    (None: every time). Returns the names of the writes refused, as they are refused."""
    write = store.write
    refused: list[str] = []

    def failing(fn: Callable[..., Any], **scope: Any) -> Any:
        name = fn.__qualname__
        if name.startswith(where) and (times is None or len(refused) < times):
            refused.append(name)
            if error is not None:
                raise error()
            raise StoreFull(store.location, 0, "mdb_txn_commit: No space left on device")
        return write(fn, **scope)

    monkeypatch.setattr(store, "write", failing)
    return refused
