"""The store from an event loop: the same transactions, without holding the loop on a server.

On PostgreSQL every store call is a round trip to the server (a write several, and a commit),
and an async run's body, its model calls and its waits all share one event loop: a store call
made there in place would stop every other task of that loop until the server answers. So the
runtime's async paths call the store through this module:

- `acall(store, fn, *args)`: `fn(*args)`, a plain function that uses the store (say
  `RunStore.get`, or `store.write` with a transaction body), run on one of the store's threads
  while the loop awaits it;
- `offload(store)`: `acall` bound to `store` (None on LMDB), for a callback the transport's
  async tee runs (a recorded reply's write);
- `on_store_thread()`: whether the caller runs inside `acall` on a store's thread, where a read
  the loop would otherwise make later (a replayed reply's further frame pages) is best made now.

The transaction bodies are the same `fn(txn)` the sync paths run: one code path, whichever
side calls it. The calls carry the caller's context (`contextvars`), so a body that asks which
run it belongs to is answered as on the loop. Each PostgreSQL store has its own threads, as many
as its connection pool holds connections (so a caller's own threads, `ctx.to_thread`, never
queue in front of the store, nor the store in front of them).

On LMDB the same functions call `fn` in place: a read is a local call of microseconds, and a
fact's flush is already taken off the loop by group commit (`journal.group_commit`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pyrula.journal.store import Store

T = TypeVar("T")

_ON_STORE_THREAD: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pyrula_on_store_thread", default=False
)
_executors: weakref.WeakKeyDictionary[Store, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_executors_lock = threading.Lock()


def remote(store: Store) -> bool:
    """Whether a call to `store` waits on a server (PostgreSQL), and so is taken off the loop."""
    return store.remote


def _executor(store: Store) -> ThreadPoolExecutor:
    with _executors_lock:
        found = _executors.get(store)
        if found is None:
            pool = getattr(store, "pool", None)
            size = int(getattr(pool, "max_size", 0) or 4)
            found = _executors[store] = ThreadPoolExecutor(
                max_workers=size, thread_name_prefix="pyrula-store"
            )
        return found


async def acall(store: Store, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)`, a function that uses `store`, without blocking the running loop
    on it: on a store thread for PostgreSQL, in place for LMDB."""
    if not remote(store):
        return fn(*args, **kwargs)
    context = contextvars.copy_context()
    context.run(_ON_STORE_THREAD.set, True)
    call = functools.partial(context.run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor(store), call)


def on_store_thread() -> bool:
    """Whether this runs inside `acall` on a store's thread, off the event loop that asked."""
    return _ON_STORE_THREAD.get()


def offload(store: Store) -> Callable[[Callable[[], Any]], Any] | None:
    """What runs a store-using callback from the loop (`acall` bound to `store`), or None
    where it may run in place (LMDB): the transport's async tee asks its sink for this."""
    if not remote(store):
        return None
    return functools.partial(acall, store)
