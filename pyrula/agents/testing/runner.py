"""`AgentRunner`: run one agent or workflow in-process on a throwaway store, get its events."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from pyrula.journal.store import Store, open_store
from pyrula.runtime import Definition, Event, Worker, submit


class AgentRunner:
    """`events = await AgentRunner(my_agent).run(...)`; `events[-1].payload["result"]` is the
    result of a completed run (a parked run ends with its `run:parked` event)."""

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

    async def run(self, *args: Any, **kwargs: Any) -> list[Event]:
        handle = submit(self.definition, *args, store=self.store, **kwargs)
        self.run_id = handle.id
        await Worker(self.store, poll_seconds=0.01).run(until_idle=True)
        return handle.events()
