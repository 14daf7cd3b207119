"""`Agent` runs the tool-calling loop as a durable run on every provider: tools journaled with
stable ids and positions, a sub-agent as a child run, a structured output validated and
journaled, approvals parking the run, a replay asking no provider and running no tool."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pyrula.agents import Agent, AgentLimits, agent, stream_to, tool
from pyrula.agents.llm import Message, TextDelta, ToolArgsDelta
from pyrula.agents.testing import AgentRunner
from pyrula.errors import ReplayInputChanged
from pyrula.runtime import RunStore, Worker, answer, cancel, fork
from tests.agents.native.support import FINAL, KINDS, SUB_TURNS, build, main_turns, provider_of
from tests.fakes.agent_api import calls, model_for, text, upstream
from tests.fakes.provider import TEST_KEY


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.log"
    path.touch()
    monkeypatch.setenv("NATIVE_EFFECTS", str(path))
    return path


def _run(kind: str, suffix: str, *, advisor: bool = True):
    provider = provider_of(kind)
    main = upstream(provider, main_turns(kind, suffix, advisor=advisor))
    sub = upstream(provider, SUB_TURNS)
    trip = build(
        kind, "http://model.test", stand_in=main, sub_stand_in=sub, suffix=suffix, advisor=advisor
    )
    runner = AgentRunner(trip)
    events = runner.run_sync("Plan a trip to Oslo")
    return runner, events, main, sub


@pytest.mark.parametrize("kind", KINDS)
def test_the_agent_runs_the_whole_loop_on_each_provider(kind, effects):
    _, events, main, sub = _run(kind, "-live")
    assert events[-1].type == "run:done"
    assert events[-1].payload["result"] == FINAL
    assert len(main.calls) == 4 and len(sub.calls) == 1
    assert sorted(line.split(" ", 1)[1] for line in effects.read_text().splitlines()) == [
        "lookup Paris",
        "weather Oslo",
        "weather Paris",
    ]
    done = [e for e in events if e.type == "llm:done"]
    assert len(done) == 4 and all(e.payload["input_tokens"] == 10 for e in done)
    tools = [e.payload for e in events if e.type == "tool:done"]
    # Parallel calls take their positions in the order the model asked for them.
    assert [(t["name"], t["tool_call_id"]) for t in tools][:2] == [
        ("lookup", tools[0]["tool_call_id"]),
        ("weather", tools[1]["tool_call_id"]),
    ]
    assert tools[0]["position"] < tools[1]["position"]
    assert any(e.type == "child:started" for e in events)
    if kind == "compatible":
        assert main.requests[0].url.path == "/openai/v1/chat/completions"


@pytest.mark.parametrize("kind", KINDS)
def test_a_replay_asks_no_provider_runs_no_tool_and_returns_the_same_value(kind, effects):
    # (A fork does not carry a child run over: this agent asks no sub-agent.)
    runner, events, main, _ = _run(kind, "-replay", advisor=False)
    journal = RunStore(runner.store)
    copy = fork(runner.run_id, events[-1].seq, store=runner.store)
    asyncio.run(Worker(runner.store, poll_seconds=0.01).run(until_idle=True))
    record = journal.get(copy.id)
    assert record.result == FINAL, record.error["message"]
    assert len(main.calls) == 3
    assert len(effects.read_text().splitlines()) == 3


def test_credentials_never_reach_the_store(effects):
    runner, _, _, _ = _run("anthropic", "-secret")
    raw = b"".join(p.read_bytes() for p in Path(runner.store.path).rglob("*") if p.is_file())
    assert TEST_KEY.encode() not in raw
    assert b"Paris" in raw  # the scan reads the records


def test_a_changed_request_on_resume_raises_replay_input_changed(effects):
    runner, events, _, _ = _run("openai", "-changed", advisor=False)
    copy = fork(runner.run_id, events[-1].seq, store=runner.store)
    main = upstream("openai", main_turns("openai", "-changed", advisor=False))
    changed = build("openai", "http://model.test", stand_in=main, suffix="-changed", advisor=False)
    changed.spec.instructions = "Plan a different trip."
    asyncio.run(Worker(runner.store, poll_seconds=0.01).run(until_idle=True))
    record = RunStore(runner.store).get(copy.id)
    assert record.status == "failed"
    assert record.error["type"] == ReplayInputChanged.__name__
    assert main.calls == []


def test_invalid_structured_output_is_asked_again_with_the_error(effects):
    import pydantic

    class Answer(pydantic.BaseModel):
        n: int

    stand_in = upstream("openai", [text('{"n": "many"}'), text('{"n": 3}')])
    counter = Agent(
        name="counter", model=model_for("openai", stand_in=stand_in), output_type=Answer
    )
    events = AgentRunner(counter).run_sync("How many?")
    assert events[-1].payload["result"] == {"n": 3}
    assert len(stand_in.calls) == 2
    assert "did not match the schema" in stand_in.calls[1]["messages"][-1]["content"]
    assert stand_in.calls[0]["response_format"]["type"] == "json_schema"


def test_structured_output_gives_up_after_its_bounded_re_asks(effects):
    import pydantic

    class Answer(pydantic.BaseModel):
        n: int

    stand_in = upstream("anthropic", [text('{"n": "many"}')])
    model = model_for("anthropic", stand_in=stand_in)
    stubborn = Agent(name="stubborn", model=model, output_type=Answer, output_retries=1)
    events = AgentRunner(stubborn).run_sync("How many?")
    assert events[-1].type == "run:error"
    assert events[-1].payload["error"]["type"] == "OutputValidationFailed"
    assert len(stand_in.calls) == 2
    assert stand_in.calls[0]["tool_choice"] == {"type": "tool", "name": "final_result"}


def test_a_tool_that_needs_approval_parks_the_run_until_answered(effects):
    sent: list[str] = []

    @tool(requires_approval=True)
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return "sent"

    stand_in = upstream("openai", [calls(("send_email", {"to": "a@b.c"})), text("done")])
    mailer = Agent(name="mailer", model=model_for("openai", stand_in=stand_in), tools=[send_email])
    runner = AgentRunner(mailer)
    events = runner.run_sync("Email them")
    assert events[-1].type == "run:parked" and sent == []
    answer(runner.run_id, "approve", store=runner.store)
    asyncio.run(Worker(runner.store, poll_seconds=0.01).run(until_idle=True))
    record = RunStore(runner.store).get(runner.run_id)
    assert record.result == "done" and sent == ["a@b.c"]
    assert len(stand_in.calls) == 2  # the first turn replayed on resume


def test_cancel_mid_loop_makes_no_further_model_or_tool_call(effects):
    ran: list[str] = []
    stand_in = upstream("openai", [calls(("stop_me", {})), calls(("other", {})), text("x")])

    @tool
    def other() -> str:
        """Never called."""
        ran.append("other")
        return "ran"

    from pyrula.agents import ToolContext

    @tool(name="stop_me")
    def stopper(ctx: ToolContext) -> str:
        """Cancel this run."""
        cancel(ctx.run_id, store=holder["store"])
        return "cancelling"

    holder: dict[str, object] = {}
    model = model_for("openai", stand_in=stand_in)
    stopped = Agent(name="stopped", model=model, tools=[stopper, other])
    runner = AgentRunner(stopped)
    holder["store"] = runner.store
    events = runner.run_sync("Go")
    assert RunStore(runner.store).get(runner.run_id).status == "cancelled"
    assert len(stand_in.calls) == 1 and ran == []
    assert [e.type for e in events].count("llm:done") == 1


def test_streamed_deltas_reach_the_handler_live_and_a_replay_is_silent(effects):
    stand_in = upstream("anthropic", [calls(("lookup", {"city": "Oslo"})), text("Oslo is cold")])
    from tests.agents.native.support import lookup

    streamer = Agent(
        name="streamer", model=model_for("anthropic", stand_in=stand_in), tools=[lookup]
    )
    seen: list[object] = []
    stream_to("streamer", seen.append)
    try:
        runner = AgentRunner(streamer)
        events = runner.run_sync("Weather?")
        assert events[-1].payload["result"].strip() == "Oslo is cold"
        assert any(isinstance(d, ToolArgsDelta) for d in seen)
        assert "".join(d.text for d in seen if isinstance(d, TextDelta)).strip() == "Oslo is cold"
        live = len(seen)
        fork(runner.run_id, events[-1].seq, store=runner.store)
        asyncio.run(Worker(runner.store, poll_seconds=0.01).run(until_idle=True))
        assert len(seen) == live  # the replay sent no delta
        assert len(stand_in.calls) == 2 and all(c["stream"] for c in stand_in.calls)
    finally:
        stream_to("streamer", None)


def test_an_agent_body_gets_ctx_llm_and_the_loop(effects):
    from tests.agents.native.support import weather

    stand_in = upstream("gemini", [calls(("weather", {"city": "Oslo"})), text("4")])
    model = model_for("gemini", stand_in=stand_in)

    @agent(model=model, tools=[weather], limits=AgentLimits(max_llm_calls=5))
    async def custom(ctx, city: str) -> dict[str, str]:
        first = await ctx.llm.complete([Message.user("Which tool?")])  # one turn, no tool run
        temperature = await ctx.run_loop(f"Temperature in {city}?")
        return {"asked_for": first.tool_calls[0].name, "temperature": temperature}

    events = AgentRunner(custom).run_sync("Oslo")
    assert events[-1].payload["result"] == {"asked_for": "weather", "temperature": "4"}
    assert len(stand_in.calls) == 3
    assert len(effects.read_text().splitlines()) == 1


def test_a_stream_the_caller_abandons_is_metered_once_as_estimated(effects):
    stand_in = upstream("openai", [text("a long answer that is never read to its end")])
    quitter = Agent(name="quitter", model=model_for("openai", stand_in=stand_in))

    def walk_away(delta: object) -> None:
        raise RuntimeError("the caller stopped reading")

    stream_to("quitter", walk_away)
    try:
        events = AgentRunner(quitter).run_sync("Talk")
    finally:
        stream_to("quitter", None)
    assert events[-1].type == "run:error"
    done = [e.payload for e in events if e.type == "llm:done"]
    assert len(done) == 1 and done[0]["estimated"] is True


def test_cancelling_the_parent_mid_sub_agent_cancels_the_child_and_asks_nothing_more(effects):
    from pyrula.agents import ToolContext

    holder: dict[str, object] = {}

    @tool(name="pull_the_plug")
    async def pull_the_plug(ctx: ToolContext) -> str:
        """Cancel the parent run, and return once it has stopped."""
        parent = ctx.run_id.split(".")[0]
        cancel(parent, store=holder["store"])
        journal = RunStore(holder["store"])
        for _ in range(2000):
            if journal.get(parent).status == "cancelled":
                break
            await asyncio.sleep(0.005)
        return "cancelled"

    sub_model = upstream("openai", [calls(("pull_the_plug", {})), text("never")])
    main_model = upstream("openai", [calls(("helper", {"prompt": "go"})), text("never")])
    helper = Agent(
        name="helper", model=model_for("openai", stand_in=sub_model), tools=[pull_the_plug]
    )
    boss = Agent(name="boss", model=model_for("openai", stand_in=main_model), tools=[helper])
    runner = AgentRunner(boss)
    holder["store"] = runner.store
    runner.run_sync("Start")
    journal = RunStore(runner.store)
    assert journal.get(runner.run_id).status == "cancelled"
    child = journal.get(f"{runner.run_id}.main.child0")
    assert child.status == "cancelled"
    assert len(main_model.calls) == 1  # no turn after the cancel
    assert len(sub_model.calls) == 1  # the child was cancelled before its next turn
