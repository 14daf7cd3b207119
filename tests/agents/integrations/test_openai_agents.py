"""The OpenAI Agents SDK recipe inside a Pyrula run, against the stand-in Responses API: an
agent with a tool (in a step), a handoff and an input guardrail, run and run_streamed, killed and
resumed; a changed instruction; and the run-time warnings about what is not journaled."""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import agents
import httpx2
import pytest
from agents import Agent, Runner, function_tool
from pyrula.fingerprints import RequestParts, canonicalize

from pyrula.agents.integrations.openai_agents import PyrulaRunHooks, unjournaled
from pyrula.errors import UnjournaledWork
from pyrula.journal.store import Store
from pyrula.runtime import RunStore, resume, submit
from pyrula.workflows import workflow
from tests.agents.integrations.openai_agents_support import (
    MODEL,
    TRIAGE,
    effects,
    frames_for,
    journaled_client,
    run_triage,
)
from tests.fakes.provider import Upstream
from tests.fakes.server import Script, Seen, Server
from tests.runtime.support import WorkerProcess, drive, new_store

ANSWER = "Filed T-42 with the printer team."
# guard, triage (hands off), specialist (calls the tool), specialist (answers)
MODEL_CALLS = 4


def _upstream() -> Upstream:
    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        return (200, *frames_for(json.loads(request.content)))

    return Upstream(httpx2, reply)


@pytest.mark.parametrize("seed", range(1))
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_sigkill_at_seeded_points_repeats_no_model_call_and_the_tool_effect_once(
    tmp_path, streamed, seed
):
    def reply(seen: Seen) -> Script:
        headers, frames = frames_for(seen.json())
        return Script(headers=headers, frames=frames, chunked=True)

    # Five live boundaries (4 requests, 1 tool) plus one per death: die at two of them.
    deaths = sorted(random.Random(f"{streamed}{seed}").sample(range(1, 7), 2))
    for n in deaths:
        (tmp_path / f"die-{n}").touch()
    store_path = tmp_path / "store"
    with Server(reply) as server:
        store = Store(store_path)
        handle = submit("oa_triage", server.url, str(tmp_path), streamed, store=store)
        journal = RunStore(store)
        exits = []
        for _ in range(len(deaths) + 1):
            worker = WorkerProcess(
                store_path, "--until-idle", module="tests.agents.integrations.openai_agents_app"
            )
            exits.append(worker.exit_code())
            if journal.get(handle.id).status == "completed":
                break
        record = journal.get(handle.id)
        assert record.status == "completed", (record.error, worker.stderr)
        assert exits.count(-9) == len(deaths)
        assert record.result == ANSWER
        assert server.count() == MODEL_CALLS  # zero repeated provider calls
        assert effects(tmp_path) == ["filed T-42"]  # the tool's effect once
        # Each Runner.run draws a random prompt_cache_key (so each attempt sent its own); a
        # resumed run replayed the calls journaled under another key all the same.
        keys = [seen.json().get("prompt_cache_key") or "" for seen in server.seen]
        assert all(key.startswith("agents-sdk:run:") for key in keys), keys
        store.close()


def test_a_changed_instruction_on_resume_raises_replay_input_changed(tmp_path):
    upstream = _upstream()
    instructions = iter([TRIAGE, TRIAGE + " Be terse."])

    @workflow(name="oa_changed")
    async def body(ctx: Any) -> str:
        journaled_client("http://openai.test", http=upstream.http_client(is_async=True))
        answer = await run_triage(
            ctx, str(tmp_path), streamed=False, instructions=next(instructions)
        )
        if ctx.attempt == 1:
            raise RuntimeError("fail once, to resume")
        return answer

    store = new_store()
    handle = submit(body, store=store)
    drive(store)
    assert len(upstream.calls) == MODEL_CALLS
    assert all(call["prompt_cache_key"].startswith("agents-sdk:run:") for call in upstream.calls)
    resume(handle.id, store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert record.status == "failed"
    assert record.error["type"] == "ReplayInputChanged"
    assert "instructions" in record.error["message"]
    assert len(upstream.calls) == MODEL_CALLS  # nothing sent for the changed call
    assert effects(tmp_path) == ["filed T-42"]


def test_the_random_prompt_cache_key_is_not_compared():
    body = {"model": MODEL, "input": "hi", "prompt_cache_key": "agents-sdk:run:1"}
    other = {**body, "prompt_cache_key": "agents-sdk:run:2"}
    url = "https://api.openai.com/v1/responses"
    first = canonicalize(RequestParts("POST", url, {}, json.dumps(body).encode()))
    second = canonicalize(RequestParts("POST", url, {}, json.dumps(other).encode()))
    assert first.digest == second.digest


def test_the_hooks_warn_inside_a_run_about_what_is_not_journaled(tmp_path):
    upstream = _upstream()

    @function_tool(needs_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    caught: list[str] = []

    @workflow(name="oa_warns")
    async def body(ctx: Any) -> str:
        journaled_client("http://openai.test", http=upstream.http_client(is_async=True))
        agents.set_trace_processors([])  # traces are made, and exported nowhere
        agents.set_tracing_disabled(False)
        try:
            desk = Agent(
                name="desk", instructions="You guard the desk.", model=MODEL, tools=[refund]
            )
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                result = await Runner.run(desk, "hi", hooks=PyrulaRunHooks())
            caught.extend(str(w.message) for w in seen if w.category is UnjournaledWork)
        finally:
            agents.set_tracing_disabled(True)
        return str(result.final_output)

    store = new_store()
    submit(body, store=store)
    drive(store)
    assert any("needs_approval" in message for message in caught), caught
    assert any("trace export" in message for message in caught)


def test_a_model_on_a_plain_client_is_named():
    from agents import OpenAIResponsesModel
    from openai import AsyncOpenAI

    plain = OpenAIResponsesModel(MODEL, openai_client=AsyncOpenAI(api_key="sk-test"))
    found = unjournaled(Agent(name="loose", model=plain))
    assert any("not send through a journaled AsyncOpenAI" in message for message in found)
