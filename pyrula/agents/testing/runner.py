"""`AgentRunner`: run one agent or workflow in-process on a throwaway store, get its events."""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

from pyrula.journal.store import Store, open_store
from pyrula.runtime import Definition, Event, Worker, submit


class AgentRunner:
    """Run one agent or workflow to its end (or its first park) and hand back its events.

    `events = await AgentRunner(my_agent).run(...)` in async code, or
    `AgentRunner(my_agent).run_sync(...)` from a plain test; `events[-1].payload["result"]` is
    the result of a completed run (a parked run ends with its `run:parked` event)."""

    def __init__(
        self,
        definition: Definition[..., Any],
        *,
        store: Store | str | os.PathLike[str] | None = None,
    ) -> None:
        self.definition = definition
        self.store = (
            store
            if isinstance(store, Store)
            else open_store(store or tempfile.mkdtemp(prefix="pyrula-runner-"))
        )
        self.run_id: str | None = None

    def run_sync(self, *args: Any, **kwargs: Any) -> list[Event]:
        """`run` for code with no event loop of its own (it starts one, like `asyncio.run`)."""
        return asyncio.run(self.run(*args, **kwargs))

    async def run(self, *args: Any, **kwargs: Any) -> list[Event]:
        """Submit the run with these arguments and work it until nothing is left to do."""
        handle = submit(self.definition, *args, store=self.store, **kwargs)
        self.run_id = handle.id
        await Worker(self.store, poll_seconds=0.01).run(until_idle=True)
        return handle.events()
