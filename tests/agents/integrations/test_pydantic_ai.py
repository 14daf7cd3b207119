"""`PyrulaDurability`: a Pydantic AI agent (function tools, structured output) inside a Pyrula
run, against the stand-in provider (OpenAI and Anthropic models): journaled, replayed without
calling the provider or running a tool again, held to the caps, cancellable, redacted."""

from __future__ import annotations

import asyncio
import json
import random
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic_ai import Agent, RunContext

from pyrula.agents import AgentLimits, agent
from pyrula.agents.compat.openai import AsyncOpenAI as JournaledAsyncOpenAI
from pyrula.agents.integrations import PyrulaDurability
from pyrula.journal.store import Store
from pyrula.runtime import RunStore, answer, cancel, resume, submit
from pyrula.workflows import workflow
from tests.agents.integrations.pydantic_ai_support import (
    TURNS,
    frames_for,
    model_for,
    triage_agent,
)
from tests.fakes.openai_api import chat_chunks
from tests.fakes.postgres import HeldStore, fresh_url, while_held
from tests.fakes.provider import Upstream
from tests.fakes.server import Script, Seen, Server
from tests.runtime.support import WorkerProcess, drive, new_store

PROVIDERS = ["openai", "anthropic"]
VERDICT = {"severity": "high", "owner": "ops"}


def _upstream(provider: str) -> Upstream:
    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        return (200, *frames_for(provider, json.loads(request.content)))

    return Upstream(httpx2, reply)


def _model(provider: str, upstream: Upstream, *, journaled: bool = False) -> Any:
    http = upstream.http_client(is_async=True, journal={} if journaled else None)
    base = "http://openai.test" if provider == "openai" else "http://anthropic.test"
    return model_for(provider, base, http_client=http)


def _events(store: Any, run_id: str, kind: str) -> list[Any]:
    return [e for e in RunStore(store).events(run_id) if e.type == kind]


def _effects(folder: Path) -> list[str]:
    path = folder / "effects"
    return path.read_text().splitlines() if path.exists() else []


# -- a killed worker's run resumes without repeating a call or an effect -----------------------


# Each release's leg dies at its own seeded pair of points (one worker start costs seconds).
RELEASE = metadata.version("pydantic-ai-slim")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sigkill_at_seeded_points_repeats_no_provider_call_and_no_tool_effect(tmp_path, provider):
    def reply(seen: Seen) -> Script:
        headers, frames = frames_for(provider, seen.json())
        return Script(headers=headers, frames=frames, chunked=True)

    # Five live boundaries (3 requests, 2 tools) plus one per death: die at two of them.
    deaths = sorted(random.Random(f"{provider}{RELEASE}").sample(range(1, 7), 2))
    for n in deaths:
        (tmp_path / f"die-{n}").touch()
    store_path = tmp_path / "store"
    with Server(reply) as server:
        store = Store(store_path)
        handle = submit("pai_triage", provider, server.url, str(tmp_path), store=store)
        journal = RunStore(store)
        exits = []
        for _ in range(len(deaths) + 1):
            worker = WorkerProcess(
                store_path, "--until-idle", module="tests.agents.integrations.pydantic_ai_app"
            )
            exits.append(worker.exit_code())
            if journal.get(handle.id).status == "completed":
                break
        record = journal.get(handle.id)
        assert record.status == "completed", (deaths, record.error, worker.stderr)
        assert exits.count(-9) == len(deaths)  # each seeded death was a real SIGKILL
        assert record.result == VERDICT
        # Zero repeated provider calls and tool effects: three requests, one notification.
        assert server.count() == len(TURNS)
        assert _effects(tmp_path) == ["notified T-42"]
        assert len(_events(store, handle.id, "llm:done")) == len(TURNS)
        store.close()


# -- in process: live, then replayed ------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_resumed_run_replays_the_agent_without_calling_the_provider_or_the_tool(
    tmp_path, provider
):
    upstream = _upstream(provider)
    tool_call_ids: list[str] = []

    @workflow(name=f"pai_replay_{provider}")
    async def body(ctx: Any) -> dict[str, str]:
        pai = triage_agent(_model(provider, upstream), str(tmp_path))

        @pai.tool
        def audit(run_ctx: RunContext[None], note: str = "") -> str:  # registered, never asked
            return note

        result = await pai.run("Triage ticket T-42")
        for message in result.all_messages():
            for part in message.parts:
                if getattr(part, "part_kind", "") == "tool-call":
                    tool_call_ids.append(part.tool_call_id)
        if ctx.attempt == 1:
            raise RuntimeError("the body fails after the agent ran")
        return result.output.model_dump()

    store = new_store()
    handle = submit(body, store=store)
    drive(store)
    assert RunStore(store).get(handle.id).error["type"] == "RuntimeError"
    live_ids = list(tool_call_ids)
    assert len(upstream.calls) == len(TURNS)
    resume(handle.id, store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert record.status == "completed", record.error
    assert record.result == VERDICT
    assert len(upstream.calls) == len(TURNS)  # nothing sent again
    assert _effects(tmp_path) == ["notified T-42"]  # the tool's effect once
    assert tool_call_ids[len(live_ids) :] == live_ids  # ctx.tool_call_id stable across a resume


def test_a_changed_prompt_on_resume_raises_replay_input_changed(tmp_path):
    upstream = _upstream("openai")
    prompts = iter(["Triage ticket T-42", "Triage ticket T-43"])

    @workflow(name="pai_changed")
    async def body(ctx: Any) -> str:
        result = await triage_agent(_model("openai", upstream), str(tmp_path)).run(next(prompts))
        if ctx.attempt == 1:
            raise RuntimeError("fail once")
        return result.output.severity

    store = new_store()
    handle = submit(body, store=store)
    drive(store)
    resume(handle.id, store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert record.status == "failed"
    assert record.error["type"] == "ReplayInputChanged"
    assert len(upstream.calls) == len(TURNS)


# -- on PostgreSQL the run's loop never waits on the server ----------------------------------


def test_a_model_requests_fact_waits_on_the_server_off_the_runs_loop(tmp_path):
    upstream = _upstream("openai")
    store = Store(fresh_url())
    seen: dict[str, int] = {}

    @workflow(name="pai_held")
    async def body(ctx: Any) -> str:
        pai = triage_agent(_model("openai", upstream), str(tmp_path))
        held = HeldStore(store.url, safety=10)  # from now on, every write of the store waits
        running = asyncio.ensure_future(pai.run("Triage ticket T-42"))
        seen["waiting"], seen["ticks"] = await while_held(held, running, 1)
        return (await running).output.owner

    try:
        handle = submit(body, store=store)
        drive(store)
        record = RunStore(store).get(handle.id)
        assert record.status == "completed" and record.result == "ops", record.error
        # The first request's `llm:done` waited on the server while the run's loop turned.
        assert seen["waiting"] >= 1 and seen["ticks"] > 0, seen
        assert len(_events(store, handle.id, "llm:done")) == len(TURNS)
    finally:
        store.close()


# -- boundaries and caps ------------------------------------------------------------------------


def test_every_call_is_a_cancel_boundary(tmp_path):
    upstream = _upstream("openai")
    store = new_store()
    run_ids: list[str] = []

    @workflow(name="pai_cancel")
    async def body(ctx: Any) -> str:
        run_ids.append(ctx.run_id)
        pai = Agent(
            _model("openai", upstream),
            name="triage",
            output_type=str,
            capabilities=[PyrulaDurability()],
        )

        @pai.tool_plain
        def lookup(ticket: str) -> str:
            cancel(run_ids[0], store=store)  # cancelled while the tool runs
            return "found"

        return (await pai.run("Triage ticket T-42")).output

    handle = submit(body, store=store)
    drive(store)
    assert RunStore(store).get(handle.id).status == "cancelled"
    assert len(upstream.calls) == 1  # no model request after the cancel
    assert len(_events(store, handle.id, "llm:done")) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_agent_holds_its_caps_and_a_workflow_only_meters(tmp_path, provider):
    upstream = _upstream(provider)

    @agent(name=f"pai_capped_{provider}", limits=AgentLimits(max_llm_calls=2))
    async def capped(ctx: Any) -> str:
        pai = triage_agent(_model(provider, upstream), str(tmp_path))
        return (await pai.run("T-42")).output.owner

    @workflow(name=f"pai_uncapped_{provider}")
    async def uncapped(ctx: Any) -> str:
        pai = triage_agent(_model(provider, upstream), str(tmp_path))
        return (await pai.run("T-42")).output.owner

    store = new_store()
    held = submit(capped, store=store)
    free = submit(uncapped, store=store)
    drive(store)
    journal = RunStore(store)
    assert journal.get(held.id).status == "budget_exceeded"
    error = journal.get(held.id).error
    assert (error["type"], error["limit"]) == ("BudgetExceeded", "max_llm_calls")
    assert len(_events(store, held.id, "llm:done")) == 2
    assert len(upstream.calls) == 2 + len(TURNS)  # the refused third call was never sent
    assert journal.get(free.id).status == "completed"
    done = _events(store, free.id, "llm:done")
    assert len(done) == len(TURNS)
    assert all(e.payload["input_tokens"] == 9 and e.payload["cost_usd"] for e in done)


@pytest.mark.parametrize("client", ["transport", "drop-in"])
def test_a_journaled_client_under_the_model_is_not_metered_twice(tmp_path, client):
    upstream = _upstream("openai")

    @workflow(name=f"pai_once_{client}")
    async def body(ctx: Any) -> str:
        if client == "transport":
            model = _model("openai", upstream, journaled=True)
        else:
            from pydantic_ai.models.openai import OpenAIChatModel
            from pydantic_ai.providers.openai import OpenAIProvider

            sdk = JournaledAsyncOpenAI(
                api_key="sk-test",
                base_url="http://openai.test/v1",
                http_client=upstream.http_client(is_async=True),
                max_retries=0,
            )
            model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=sdk))
        return (await triage_agent(model, str(tmp_path)).run("T-42")).output.owner

    store = new_store()
    handle = submit(body, store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert record.status == "completed", record.error
    assert len(_events(store, handle.id, "llm:done")) == len(TURNS)


def test_a_toolset_passed_to_run_is_refused_inside_a_run(tmp_path):
    from pydantic_ai.toolsets import FunctionToolset

    upstream = _upstream("openai")
    extra: FunctionToolset[None] = FunctionToolset()

    @extra.tool_plain
    def escalate(ticket: str) -> str:
        return "escalated"

    @workflow(name="pai_toolsets")
    async def body(ctx: Any) -> str:
        pai = triage_agent(_model("openai", upstream), str(tmp_path))
        return (await pai.run("T-42", toolsets=[extra])).output.owner

    store = new_store()
    handle = submit(body, store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert record.status == "failed"
    assert record.error["type"] == "UserError" and "toolsets" in record.error["message"].lower()
    assert upstream.calls == []


def test_outside_a_run_the_agent_is_unchanged(tmp_path):
    upstream = _upstream("anthropic")
    result = triage_agent(_model("anthropic", upstream), str(tmp_path)).run_sync("T-42")
    assert result.output.model_dump() == VERDICT
    assert len(upstream.calls) == len(TURNS)


# -- streaming: one journaled call; the handler gets its events after it, and on a replay --------


def test_run_stream_and_the_event_handler_are_served_whole_and_replayed(tmp_path):
    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
        return (
            200,
            {"content-type": "text/event-stream"},
            chat_chunks(["Pong ", "from ", "the stream"], role=True, usage=usage),
        )

    upstream = Upstream(httpx2, reply)
    handled: list[list[str]] = []

    async def handler(ctx: Any, events: Any) -> None:
        async for event in events:
            handled[-1].append(type(event).__name__)

    @workflow(name="pai_stream")
    async def body(ctx: Any) -> list[Any]:
        handled.append([])
        pai = Agent(
            _model("openai", upstream),
            name="streamer",
            capabilities=[PyrulaDurability(event_stream_handler=handler)],
        )
        async with pai.run_stream("Ping?") as streamed:
            deltas = [text async for text in streamed.stream_text(delta=True)]
        ran = await pai.run("Ping again?")
        if ctx.attempt == 1:
            raise RuntimeError("fail once, to replay")
        return [deltas, ran.output]

    store = new_store()
    handle = submit(body, store=store)
    drive(store)
    resume(handle.id, store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert record.status == "completed", record.error
    # run_stream hands the response over whole: one piece, not three deltas.
    assert record.result == [["Pong from the stream"], "Pong from the stream"]
    assert len(upstream.calls) == 2  # the replay sent nothing
    live, replayed = handled
    assert "PartDeltaEvent" not in live  # events after the call, no deltas
    assert live.count("PartStartEvent") == 2 and live.count("PartEndEvent") == 2  # one per call
    assert replayed == live  # rebuilt from the record, handled again


# -- capture below io ---------------------------------------------------------------------------


def _shown(store: Any, run_id: str) -> str:
    """Everything a user sees of a run: its record and its events, as `runs show --json`."""
    journal = RunStore(store)
    events = [e.to_json() for e in journal.events(run_id)]
    return json.dumps([journal.get(run_id).to_json(), events])


def test_below_io_results_are_withheld_and_a_killed_worker_replays_them(tmp_path):
    def reply(seen: Seen) -> Script:
        headers, frames = frames_for("openai", seen.json())
        return Script(headers=headers, frames=frames, chunked=True)

    for n in (2, 5):  # killed as the lookup tool starts, and again before the notify tool
        (tmp_path / f"die-{n}").touch()
    store_path = tmp_path / "store"
    with Server(reply) as server:
        store = Store(store_path)
        handle = submit(
            "pai_triage", "openai", server.url, str(tmp_path), store=store, capture="metadata"
        )
        exits = []
        for _ in range(3):
            worker = WorkerProcess(
                store_path, "--until-idle", module="tests.agents.integrations.pydantic_ai_app"
            )
            exits.append(worker.exit_code())
        journal = RunStore(store)
        record = journal.get(handle.id)
        assert record.status == "completed", (record.error, worker.stderr)
        assert exits == [-9, -9, 0]
        assert server.count() == len(TURNS)  # no model request sent twice
        assert _effects(tmp_path) == ["notified T-42"]  # no tool effect repeated
        shown = _shown(store, handle.id)
        for text in ("printer is on fire", "owner notified", "T-42", '"ops"', "call_lookup"):
            assert text not in shown  # no model output, tool result or answer in sight
        units = [e for e in journal.events(handle.id) if e.type == "step:done"]
        assert units and all(e.payload["result"] is None for e in units)
        assert len(_events(store, handle.id, "llm:done")) == len(TURNS)  # still metered
        assert journal.withheld(handle.id, "run") == {"result": VERDICT}
        store.close()


def test_below_io_a_failed_tool_keeps_only_its_type_and_replays_as_itself(tmp_path):
    upstream = _upstream("openai")
    ran: list[str] = []
    caught: list[str] = []

    @workflow(name="pai_metadata_failure")
    async def body(ctx: Any) -> str:
        pai = Agent(_model("openai", upstream), name="triage", capabilities=[PyrulaDurability()])

        @pai.tool_plain
        def lookup(ticket: str) -> str:
            ran.append(ticket)
            raise PermissionError("the CEO's password is hunter2")

        try:
            return (await pai.run("Triage ticket T-42")).output
        except PermissionError as failure:
            caught.append(str(failure))
            await ctx.interrupt("retry by hand?")  # parks; the answer replays the failure
            raise

    store = new_store()
    handle = submit(body, store=store, capture="metadata")
    drive(store)
    assert RunStore(store).get(handle.id).status == "parked"
    answer(handle.id, "no", store=store)
    drive(store)
    record = RunStore(store).get(handle.id)
    assert record.status == "failed"
    assert ran == ["T-42"] and len(upstream.calls) == 1  # replayed: no second call or tool run
    # The same class with the same message on the replay, though the events keep only its type.
    assert caught == ["the CEO's password is hunter2"] * 2
    failed = _events(store, handle.id, "step:error")[0].payload["error"]
    assert set(failed) == {"type", "module", "qualname"} and failed["type"] == "PermissionError"
    assert set(record.error) == {"type", "module", "qualname"}
    assert "hunter2" not in _shown(store, handle.id)
