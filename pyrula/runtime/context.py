"""The contexts a run's body is handed: every durable operation it can perform."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from pyrula.errors import BudgetExceeded, DurableInvocationCancelled
from pyrula.journal.async_store import acall
from pyrula.journal.store import Txn
from pyrula.runtime.attempt import Attempt, Park
from pyrula.runtime.calls import current_run, enter_scope, in_scope
from pyrula.runtime.children import child_result, child_run_id, submit_child
from pyrula.runtime.failures import describe_error, rebuild_error
from pyrula.runtime.positions import Scope
from pyrula.runtime.records import to_json_value
from pyrula.runtime.runstore import PARKED, Event

T = TypeVar("T")

# A sleep shorter than this waits in place (holding the lease); a longer one parks the run.
_PARK_AFTER_SECONDS = 2.0


async def call_awaited(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, awaited if it returns an awaitable (a step or tool may be either)."""
    result = fn(*args, **kwargs)
    # Plain values are told apart first: `inspect.isawaitable`'s ABC check cost a plain
    # function's step a few percent of its CPU.
    if type(result) not in _NEVER_AWAITABLE and inspect.isawaitable(result):
        result = await result
    return result


_NEVER_AWAITABLE = frozenset({str, int, float, bool, type(None), dict, list, tuple, bytes})


class WorkflowContext:
    """Handed to a `@workflow` body as its first argument."""

    def __init__(self, attempt: Attempt) -> None:
        self._attempt = attempt

    @property
    def run_id(self) -> str:
        return self._attempt.run.id

    @property
    def attempt(self) -> int:
        return self._attempt.lease.attempt

    @property
    def cancelled(self) -> bool:
        return self._attempt.run_store.cancel_requested(self.run_id)

    # -- steps ---------------------------------------------------------------------------------

    async def step(
        self,
        name_or_fn: str | Callable[..., Any],
        *args: Any,
        retries: int = 0,
        backoff: float = 0.5,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` once: its result is journaled and replayed ever after.

        `ctx.step("charge", charge_card, order)` or `ctx.step(charge_card, order)`. A failure is
        retried `retries` times with exponential `backoff`, then journaled and raised again on
        every replay.
        """
        if isinstance(name_or_fn, str):
            name, fn = name_or_fn, args[0]
            args = args[1:]
        else:
            fn = name_or_fn
            name = getattr(fn, "__name__", "step")
        return await self._unit("step", name, fn, args, kwargs, retries=retries, backoff=backoff)

    async def _unit(
        self,
        kind: str,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retries: int = 0,
        backoff: float = 0.5,
        extra: dict[str, Any] | None = None,
        before: Callable[[str], Awaitable[None]] | None = None,
    ) -> Any:
        """A journaled unit of work; `before(position)` runs only when the unit runs live."""
        attempt = self._attempt
        # The position before the first await: units started together take theirs in the
        # order they began, whatever order the store answers them in.
        position = attempt.next_position(kind)
        await attempt.acheck_cancel()
        recorded = attempt.facts.get(position)
        if recorded is not None:
            if recorded.payload.get("name") != name:
                from pyrula.errors import ReplayInputChanged

                raise ReplayInputChanged(
                    f"run {self.run_id}: {kind} {position} was {recorded.payload.get('name')!r} "
                    f"when journaled and is {name!r} now; a resumed run must take the same path"
                )
            kept = recorded.payload
            if kept.get("withheld"):  # below the io capture level: the value was kept apart
                run_store = attempt.run_store
                kept = await acall(run_store.store, run_store.withheld, self.run_id, position)
            if recorded.type.endswith(":done"):
                return kept.get("result")
            raise rebuild_error(kept.get("error", {}))
        if before is not None:
            await before(position)
        outer = current_run().scope
        charged_to = "run" if kind == "tool" and outer.charged_to == "run" else kind
        scope = Scope(position, within=kind, unit=position, charged_to=charged_to)
        with in_scope(scope):
            for tries in range(retries + 1):
                try:
                    result = to_json_value(await call_awaited(fn, *args, **kwargs))
                    break
                except (BudgetExceeded, Exception) as exc:
                    if isinstance(exc, BudgetExceeded) or tries == retries:
                        payload = {"position": position, "name": name, **(extra or {})}
                        await _write_outcome(attempt, f"{kind}:error", payload, "error", exc)
                        raise
                    await attempt.awrite(
                        f"{kind}:retry",
                        {
                            "name": name,
                            "unit": position,
                            "try": tries + 1,
                            "error": describe_error(exc, capture=attempt.run.capture),
                        },
                    )
                    await asyncio.sleep(backoff * 2**tries)
                    await attempt.acheck_cancel()
        payload = {"position": position, "name": name, **(extra or {})}
        await _write_outcome(attempt, f"{kind}:done", payload, "result", result)
        # The commit above is awaited (group commit), so even a plain-function step suspends
        # here and the lease's heartbeat keeps running.
        return result

    # -- threads ---------------------------------------------------------------------------------

    async def to_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run blocking `fn` on a thread that carries the run: its sync model calls journal."""
        position = self._attempt.next_position("thread")
        base = current_run().scope
        return await self._on_thread(
            Scope(f"thread:{position}", base.within, base.unit, base.charged_to),
            fn,
            *args,
            **kwargs,
        )

    async def map_threads(self, fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
        """`fn(item)` for each item, concurrently on threads, each with its own replay scope."""
        position = self._attempt.next_position("map")
        base = current_run().scope
        return list(
            await asyncio.gather(
                *(
                    self._on_thread(
                        Scope(f"map:{position}:{i}", base.within, base.unit, base.charged_to),
                        fn,
                        item,
                    )
                    for i, item in enumerate(items)
                )
            )
        )

    async def _on_thread(self, scope: Scope, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        await self._attempt.acheck_cancel()
        context = contextvars.copy_context()
        context.run(enter_scope, scope)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: context.run(fn, *args, **kw))

    # -- waiting ---------------------------------------------------------------------------------

    async def sleep(self, seconds: float) -> None:
        """A durable sleep: a resumed run wakes when the original deadline passes."""
        attempt = self._attempt
        position = attempt.next_position("sleep")
        recorded = attempt.facts.get(position)
        if recorded is None:
            recorded = await attempt.awrite(
                "sleep", {"position": position, "until": time.time() + seconds}
            )
        until = float(recorded.payload["until"])
        remaining = until - time.time()
        if remaining <= 0:
            return
        if remaining < _PARK_AFTER_SECONDS:
            await asyncio.sleep(remaining)
            return
        raise Park("sleep", {"position": position, "until": until}, wake_at=until)

    async def interrupt(self, question: Any, *, _position: str | None = None) -> Any:
        """Park the run until someone answers `question` (`pyrula runs answer RUN ANSWER`)."""
        attempt = self._attempt
        position = _position or attempt.next_position("interrupt")
        await attempt.acheck_cancel()
        for answer in attempt.by_type["interrupt:answer"]:
            if answer.payload.get("id") == position:
                return answer.payload.get("answer")
        if attempt.facts.get(position) is None:
            await attempt.awrite(
                "interrupt",
                {"position": position, "id": position, "question": to_json_value(question)},
            )
        raise Park("interrupt", {"id": position, "question": to_json_value(question)})

    async def wait_signal(self, name: str) -> Any:
        """The next signal `name` sent to this run (parks until one arrives)."""
        attempt = self._attempt
        position = attempt.next_position(f"wait:{name}:")
        await attempt.acheck_cancel()
        index = int(position.rsplit(":", 1)[1])
        arrived = [e for e in attempt.by_type["signal"] if e.payload.get("name") == name]
        if index < len(arrived):
            return arrived[index].payload.get("payload")
        raise Park("signal", {"name": name}, awaits=(name, index))

    async def send_signal(self, run_id: str, name: str, payload: Any = None) -> None:
        """Send a signal to another run, once: the signal and this run's `signal:sent` are one
        commit, so neither a replay nor a crash between the two sends it again."""
        attempt = self._attempt
        position = attempt.next_position("send")
        await attempt.acheck_cancel()
        if attempt.facts.get(position) is not None:
            return
        run_store, signal = attempt.run_store, {"name": name, "payload": to_json_value(payload)}
        sent = {"position": position, "to": run_id, "name": name}
        record = run_store.fenced_append(self.run_id, attempt.lease, "signal:sent", sent, None)

        def send(txn: Txn) -> Event:
            run_store.deliver_in(txn, run_id, "signal", signal)
            return record(txn)

        attempt.remember([await acall(run_store.store, attempt.commit, send, also=(run_id,))])

    async def emit(self, kind: str, payload: dict[str, Any] | None = None) -> None:
        """A progress event in the run's journal (written once, not again on replay)."""
        attempt = self._attempt
        position = attempt.next_position("emit")
        await attempt.acheck_cancel()
        if attempt.facts.get(position) is None:
            await attempt.awrite(
                "emit", {"position": position, "kind": kind, "data": to_json_value(payload or {})}
            )

    async def run_child(
        self,
        workflow: Any,
        *args: Any,
        parent_close: str = "cancel",
        **kwargs: Any,
    ) -> Any:
        """Start `workflow` as a child run (once) and wait for its result.

        If this run ends while the child is still running, `parent_close` decides the child's
        fate: "cancel" (the default), "terminate" or "abandon".
        """
        if parent_close not in ("cancel", "terminate", "abandon"):
            raise ValueError("parent_close must be 'cancel', 'terminate' or 'abandon'")
        attempt = self._attempt
        position = attempt.next_position("child")
        await attempt.acheck_cancel()
        child_id = child_run_id(self.run_id, position)
        if attempt.facts.get(position) is None:
            store = attempt.run_store.store
            await acall(store, submit_child, attempt, workflow, child_id, args, kwargs)
            await attempt.awrite(
                "child:started",
                {"position": position, "child": child_id, "parent_close": parent_close},
            )
        attempt.open_children[child_id] = parent_close
        result = await child_result(attempt, child_id)
        attempt.open_children.pop(child_id, None)
        return result


async def _write_outcome(
    attempt: Attempt, kind: str, payload: dict[str, Any], field: str, value: Any
) -> None:
    """Journal a unit's outcome. At the `io` capture level its event holds the result (or the
    failure in full); below it the event holds no result and only the failure's class, and the
    value a replay needs is kept apart (`RunStore.withheld`), never shown with the events."""
    if field == "error":
        full = describe_error(value)
        shown = describe_error(value, capture=attempt.run.capture)
    else:
        full = shown = value
    if attempt.run.capture == "io":
        await attempt.awrite(kind, {**payload, field: full})
    else:
        hidden = {**payload, field: None if field == "result" else shown, "withheld": True}
        await attempt.awrite(kind, hidden, withheld={field: full})


class AgentContext(WorkflowContext):
    """Handed to an `@agent` body: a workflow context whose model calls are held to its limits."""


class ToolContext(WorkflowContext):
    """Handed to a `@tool` whose first parameter asks for it."""

    def __init__(self, attempt: Attempt, tool_call_id: str | None) -> None:
        super().__init__(attempt)
        self.tool_call_id = tool_call_id
        # Stable across a resume: the tool's position in the run, unless the model named it.
        self.idempotency_key = tool_call_id

    @property
    def within(self) -> str:
        return current_run().scope.within


def wake_if_signalled(attempt: Attempt, name: str, index: int) -> None:
    """After the run parked on `wait_signal(name)` for the `index`-th such signal: wake it now
    if that signal is in its journal already. A signal delivered while the run was running
    (after its attempt read the journal) woke nothing; one delivered after the park wakes it."""
    run_store, run_id = attempt.run_store, attempt.run.id
    arrived = [
        e for e in run_store.events(run_id) if e.type == "signal" and e.payload.get("name") == name
    ]
    if len(arrived) > index and run_store.get(run_id).status == PARKED:
        run_store.update(run_id, wake_at=0.0)


def cancelled_error(run_id: str) -> DurableInvocationCancelled:
    return DurableInvocationCancelled(f"run {run_id} was cancelled")


__all__ = ["AgentContext", "ToolContext", "WorkflowContext", "cancelled_error"]
