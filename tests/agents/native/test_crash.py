"""SIGKILL real worker processes running the native trip agent (two tools, a sub-agent, a
structured output) at seeded random points, on every provider's stand-in over 127.0.0.1: no
finished model turn is asked again, no finished tool runs again, the answer is the same."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from tests.agents.native.support import (
    FINAL,
    KINDS,
    SUB_TURNS,
    Zygote,
    main_turns,
    provider_of,
)
from tests.fakes.agent_api import assistant_turns, scripted
from tests.fakes.server import Seen, Server, serving

ROOT = Path(__file__).parents[3]
KILLS = 6  # per provider: 30 in all


def _stand_in(kind: str) -> Any:
    provider = provider_of(kind)
    main = serving(scripted(provider, main_turns(kind, "-crash")))
    sub = serving(scripted(provider, SUB_TURNS))

    def reply(seen: Seen) -> Any:
        return (sub if "/sub/" in seen.path else main)(seen)

    return Server(reply)


def _turn(provider: str, seen: Seen) -> int:
    return assistant_turns(provider, json.loads(seen.body))


def _facts(journal: RunStore, run_id: str) -> tuple[int, set[str]]:
    events = journal.events(run_id)
    turns = sum(1 for e in events if e.type == "llm:done" and e.payload.get("position"))
    tools = {e.payload["tool_call_id"] for e in events if e.type == "tool:done"}
    return turns, tools


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_at_seeded_points_repeats_no_finished_turn_or_tool(tmp_path, kind):
    rng = random.Random(kind)
    provider = provider_of(kind)
    effects = tmp_path / "effects.log"
    effects.touch()
    store_path = tmp_path / "store"
    store = Store(store_path)
    journal = RunStore(store)
    handle = submit(f"trip-{kind}-crash", "Plan a trip to Oslo", store=store)
    zygote = Zygote(effects)
    checkpoints: list[tuple[int, set[str], int, int, bool]] = []
    with _stand_in(kind) as server:
        try:
            kills = 0

            def progress() -> int:
                return server.count() + len(effects.read_text().splitlines())

            while kills < KILLS and journal.get(handle.id).status != "completed":
                target = progress() + rng.randint(0, 2)
                pid = zygote.ask(f"fork {store_path} {server.url} {kind}")
                deadline = time.monotonic() + 20
                while progress() < target and time.monotonic() < deadline:
                    if journal.get(handle.id).status == "completed":
                        break
                    time.sleep(0.001 * rng.randint(0, 5))
                os.kill(pid, signal.SIGKILL)
                zygote.ask(f"reap {pid}")
                kills += 1
                turns, tools = _facts(journal, handle.id)
                child = f"{handle.id}.main.child0"
                child_done = any(e.type == "llm:done" for e in _events_or_none(journal, child))
                checkpoints.append(
                    (
                        turns,
                        tools,
                        server.count(),
                        len(effects.read_text().splitlines()),
                        child_done,
                    )
                )
            pid = zygote.ask(f"fork {store_path} {server.url} {kind}")
            assert zygote.ask(f"reap {pid}") == 0
        finally:
            zygote.close()
        seen = list(server.seen)
    record = journal.get(handle.id)
    assert record.status == "completed", record.error
    assert record.result == FINAL
    assert kills == KILLS, "the run finished before every kill landed"
    lines = effects.read_text().splitlines()
    for turns, tools, sent, effects_then, child_done in checkpoints:
        later = seen[sent:]
        asked_again = [s for s in later if "/sub/" not in s.path and _turn(provider, s) < turns]
        assert asked_again == [], "a journaled model turn was asked again"
        assert not (child_done and any("/sub/" in s.path for s in later))
        ran_again = {line.split()[0] for line in lines[effects_then:]} & tools
        assert ran_again == set(), "a finished tool ran again"
    # Every tool call ran at least once, and each turn reached the provider.
    assert {line.split(" ", 1)[1] for line in lines} == {
        "lookup Paris",
        "weather Paris",
        "weather Oslo",
    }
    store.close()


def _events_or_none(journal: RunStore, run_id: str) -> list[Any]:
    try:
        return journal.events(run_id)
    except Exception:
        return []
