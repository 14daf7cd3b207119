"""`as_langgraph_node(workflow, ...)`: a durable Pyrula run as one step of a LangGraph graph.

The node submits the workflow to a store a Pyrula worker consumes, and awaits the run; it never
executes the workflow inline. The run's identity is `thread_id::<LangGraph task>::node_key`,
its idempotency key: LangGraph's own resume (`ainvoke(None, config)`, `Command(resume=...)`)
runs the same task again and so re-attaches the same run, while every cycle pass and every new
`ainvoke` is a new task and starts its own run. Re-attaching with a different input raises
`IdempotencyConflict`, a `ValueError`.

The interrupt bridge: when the workflow parks on `ctx.interrupt(question)`, the node calls
LangGraph's `interrupt(question)`; the graph pauses and checkpoints. Resuming it with
`Command(resume=answer)` re-runs the node from its top: it re-attaches the run, calls
`interrupt()` again for each question the run's journal shows answered (LangGraph hands back
the answers it holds, in order), then for the pending one, whose answer it delivers to the run.
Both the question and the answer are journaled in the run.

A cancel on the store (`pyrula runs cancel`) ends the node with `DurableInvocationCancelled`
once the run is cancelled; cancelling the task awaiting the node only detaches from the run,
which goes on, and a later re-invocation re-attaches it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from pyrula.errors import IntegrationSetupError
from pyrula.runtime import Definition, RunHandle, answer, submit

__all__ = ["as_langgraph_node"]

# LangGraph puts the graph's checkpointer in each task's config under this key.
_CHECKPOINTER_KEY = "__pregel_checkpointer"
_TERMINAL = frozenset({"completed", "failed", "cancelled", "budget_exceeded"})

Node = Callable[[Any, RunnableConfig], Awaitable[dict[str, Any]]]


def _identity(config: RunnableConfig, node_key: str | None) -> str:
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    thread_id = configurable.get("thread_id")
    if configurable.get(_CHECKPOINTER_KEY) is None or thread_id is None:
        raise IntegrationSetupError(
            "as_langgraph_node needs a checkpointed graph: compile it with a checkpointer "
            "(`graph.compile(checkpointer=InMemorySaver())`, or the SQLite one) and invoke it "
            "with `config={'configurable': {'thread_id': ...}}`; the run's identity and the "
            "graph's resume both come from the thread"
        )
    namespace = str(metadata.get("langgraph_checkpoint_ns") or "")
    task = namespace.rpartition(":")[2] or str(metadata.get("langgraph_step", ""))
    key = node_key or str(metadata.get("langgraph_node", ""))
    return f"{thread_id}::{task}::{key}"


def _interrupts(handle: RunHandle) -> tuple[list[Any], list[tuple[str, Any]]]:
    """The run's answered questions in order, and its pending ones (id, question)."""
    events = handle.events()
    answered = {e.payload.get("id") for e in events if e.type == "interrupt:answer"}
    asked = [e.payload for e in events if e.type == "interrupt"]
    done = [p.get("question") for p in asked if p.get("id") in answered]
    pending = [(str(p["id"]), p.get("question")) for p in asked if p.get("id") not in answered]
    return done, pending


async def _await_run(
    handle: RunHandle, *, poll_seconds: float, worker_timeout: float, store: Any
) -> Any:
    """Wait for the run, bridging each interrupt it parks on to LangGraph's `interrupt()`."""
    bridged = 0  # how many of the run's questions this node execution has handed to LangGraph
    queued_since: float | None = None
    while True:
        record = handle.record
        if record.status in _TERMINAL:
            return await handle.result(poll_seconds)
        done, pending = _interrupts(handle)
        if record.status == "parked" and pending:
            # A node re-runs from its top on resume: replay the questions already answered, in
            # order, so LangGraph hands this execution's answers back to the right calls.
            for question in done[bridged:]:
                interrupt(question)
            bridged = len(done)
            question = pending[0][1]
            reply = interrupt(question)  # pauses the graph; returns the answer on its resume
            answer(handle.id, reply, store=store)
            bridged += 1
            queued_since = None
            continue
        if record.status == "queued":
            queued_since = queued_since if queued_since is not None else time.monotonic()
            if time.monotonic() - queued_since > worker_timeout:
                raise IntegrationSetupError(
                    f"run {handle.id} has waited {worker_timeout:g}s for a worker: "
                    "as_langgraph_node submits the workflow and awaits it, so a Pyrula worker "
                    "must consume the store (`pyrula worker --import <module> --store <path>`, "
                    "or `Worker(store).run()` in a task)"
                )
        else:
            queued_since = None
        await asyncio.sleep(poll_seconds)


def as_langgraph_node(
    workflow: Definition[..., Any] | str,
    *,
    store: Any = None,
    output_key: str | None = None,
    input: Callable[[Any], Any] | None = None,
    node_key: str | None = None,
    poll_seconds: float = 0.05,
    worker_timeout: float = 30.0,
) -> Node:
    """A LangGraph node that runs `workflow` as a durable Pyrula run and returns its result.

    The workflow is called with one argument: the graph's state, or what `input(state)`
    returns (it must be JSON-serialisable). The node returns `{output_key: result}`
    (`output_key` defaults to the workflow's name). `node_key` defaults to the node's name in
    the graph. The graph must be compiled with a checkpointer, and a worker must consume
    `store`: the node says which is missing (a run still queued after `worker_timeout`
    seconds is taken to mean no worker).
    """
    name = workflow if isinstance(workflow, str) else workflow.name
    key_out = output_key or name
    to_input = input or (lambda state: state)

    async def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        identity = _identity(config, node_key)
        handle = submit(workflow, to_input(state), store=store, idempotency_key=identity)
        result = await _await_run(
            handle, poll_seconds=poll_seconds, worker_timeout=worker_timeout, store=store
        )
        return {key_out: result}

    node.__name__ = f"pyrula_{name}"
    node.__qualname__ = node.__name__
    return node
