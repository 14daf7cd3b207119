"""One MCP tool call as a durable run: submit it (under the client's idempotency key, scoped to
its caller and the tool), then wait for a worker to finish it."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import anyio

from pyrula.agents.mcp._tools import ServedTool
from pyrula.errors import (
    DurableInvocationCancelled,
    IdempotencyConflict,
    StoreError,
    ToolServerUnavailable,
)
from pyrula.journal.async_store import acall
from pyrula.journal.wakeups import pause
from pyrula.runtime import RunHandle, RunRecord, cancel, submit

_ENDED = frozenset({"completed", "failed", "cancelled", "budget_exceeded"})


@dataclass(frozen=True)
class CallOptions:
    """How the server waits: `worker_timeout` seconds without a live worker on the run end the
    call with `ToolServerUnavailable` (None waits for ever); `poll_seconds` between looks where
    the store sends no wake-ups (LMDB). On PostgreSQL the server looks again when the store
    announces a change (`LISTEN/NOTIFY`: the run ended, or its cancel was asked), at the
    latest after the wake-ups' long fallback or at the worker deadline."""

    worker_timeout: float | None = None
    poll_seconds: float = 0.05


def scoped_key(identity: str, tool_name: str, key: str) -> str:
    """The store's idempotency token: the client's key, within its caller and the tool."""
    return f"mcp:{identity}:{tool_name}:{key}"


def start(
    store: Any,
    served: ServedTool,
    arguments: dict[str, Any],
    *,
    identity: str,
    key: str | None,
) -> RunHandle:
    """Submit the call, or re-attach to the run an earlier call with the same key started."""
    token = scoped_key(identity, served.name, key) if key is not None else None
    try:
        return submit(served.workflow, arguments, store=store, idempotency_key=token)
    except IdempotencyConflict:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was already used for a call to {served.name!r} with other "
            "arguments; send a new _meta.idempotency_key for a different call"
        ) from None
    except StoreError as exc:
        raise unavailable(exc) from exc


def unavailable(exc: BaseException) -> ToolServerUnavailable:
    return ToolServerUnavailable(
        f"the durable tool server cannot use its store ({type(exc).__name__}: {exc}); check "
        "the --store path (or PYRULA_STORE) is the folder the workers use, and that it is "
        "readable and writable"
    )


def _look(handle: RunHandle) -> tuple[bool, RunRecord]:
    """Whether the run's cancel was requested, and its record: one look at it."""
    return handle.run_store.cancel_requested(handle.id), handle.record


def _worker_on_it(record: RunRecord, now: float) -> bool:
    lease = record.lease or {}
    return record.status == "running" and float(lease.get("expires", 0)) > now


async def outcome(handle: RunHandle, served: ServedTool, options: CallOptions) -> Any:
    """The run's result once a worker has finished it; its error if it failed.

    A cancel requested on the store ends the wait with `DurableInvocationCancelled` at once (the
    run stops at its next boundary); so does a worker missing for longer than
    `options.worker_timeout`, with `ToolServerUnavailable`."""
    unattended_since: float | None = None
    wake = handle.run_store.store.wakeups()
    while True:
        seen = wake.count if wake is not None else 0
        try:
            # Made off the event loop (on a store thread for PostgreSQL): the server's other
            # calls go on while the look waits on the store.
            cancelled, record = await acall(handle.run_store.store, _look, handle)
            # A cancelled call stays cancelled for its callers, even where the tool had
            # already finished when the cancel arrived.
            if cancelled:
                raise DurableInvocationCancelled(
                    f"run {handle.id} (tool {served.name!r}) was cancelled"
                )
            if record.status in _ENDED:
                return await handle.result()
            now = time.monotonic()
            if _worker_on_it(record, time.time()):
                unattended_since = None
            elif unattended_since is None:
                unattended_since = now
            elif options.worker_timeout is not None and (
                now - unattended_since > options.worker_timeout
            ):
                raise ToolServerUnavailable(
                    f"no worker took run {handle.id} (tool {served.name!r}) within "
                    f"{options.worker_timeout:g}s; start one on the same store that imports the "
                    "tools: pyrula mcp worker --import MODULE:TOOLS --store PATH (or pyrula "
                    "worker --import MODULE, where MODULE builds the server). The run stays "
                    "queued: retry with the same _meta.idempotency_key to wait for it again"
                )
        except StoreError as exc:
            raise unavailable(exc) from exc
        longest = None
        if unattended_since is not None and options.worker_timeout is not None:
            # Nothing announces a lease running out: look again just past the deadline.
            longest = unattended_since + options.worker_timeout - now + options.poll_seconds
        await pause(wake, seen, options.poll_seconds, longest)


# How long a cancelled call waits for its run's cancel to be written before it ends anyway.
CANCEL_WRITE_SECONDS = 10.0


async def cancel_run(store: Any, run_id: str) -> None:
    """The client cancelled its request: cancel the run on the store (best effort).

    Called from the handler's cancelled branch, so it is shielded from that cancellation (or it
    would be cancelled at its first await), bounded by `CANCEL_WRITE_SECONDS`, and made off the
    event loop like the call's other store work: on a server, the write's wait holds none of the
    server's other calls."""
    with anyio.move_on_after(CANCEL_WRITE_SECONDS, shield=True):
        try:
            await acall(store, functools.partial(cancel, run_id, store=store))
        except Exception:  # the call is ending anyway; the run then goes on to its end
            return
