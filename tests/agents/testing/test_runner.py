"""An agent tested offline: inside a pytest cassette, `AgentRunner`'s model calls — through the
real OpenAI and Anthropic SDKs — are recorded once into the test's cassette and replayed after
with the network blocked; the test asserts on the run's events, spend and tools."""

from __future__ import annotations

import pytest

import tests.fakes.provider  # noqa: F401  (in-process pytester runs reuse the SDK imports)

SUITE = """
import pytest
from pyrula.agents import AgentContext, agent, tool
from pyrula.agents.compat.anthropic import AsyncAnthropic
from pyrula.agents.compat.openai import AsyncOpenAI
from pyrula.agents.testing import AgentRunner
from tests.fakes import anthropic_api, openai_api
from tests.fakes.provider import ANTHROPIC_LIB, OPENAI_LIB, ask

OPENAI = openai_api.upstream()
ANTHROPIC = anthropic_api.upstream()
TOOL_RUNS = []

@tool
async def shout(text: str) -> str:
    TOOL_RUNS.append(text)
    return text.upper()

@agent(name="sample.triage")
async def triage(ctx: AgentContext, ticket: str) -> str:
    openai = AsyncOpenAI(
        api_key="sk-test", base_url=openai_api.BASE_URL, max_retries=0,
        http_client=OPENAI_LIB.AsyncClient(transport=OPENAI.transport()),
    )
    anthropic = AsyncAnthropic(
        api_key="sk-ant-test", base_url=anthropic_api.BASE_URL, max_retries=0,
        http_client=ANTHROPIC_LIB.AsyncClient(transport=ANTHROPIC.transport()),
    )
    first = await openai.chat.completions.create(model="gpt-4o-mini", messages=ask(ticket))
    parts = []
    stream = await openai.chat.completions.create(
        model="gpt-4o-mini", messages=ask(ticket + "?"), stream=True,
        stream_options={"include_usage": True},
    )
    async for chunk in stream:
        parts.extend(c.delta.content or "" for c in chunk.choices)
    async with anthropic.messages.stream(
        model="claude-sonnet-4-5", max_tokens=20, messages=ask(ticket)
    ) as events:
        told = await events.get_final_text()
    return await shout(first.choices[0].message.content + "|" + "".join(parts) + "|" + told)

@pytest.mark.pyrula
def test_triage():
    runner = AgentRunner(triage)
    events = runner.run_sync("T-42")
    assert events[-1].type == "run:done"
    assert runner.tools_called() == ["{tool}"]
    spend = runner.spend()
    assert spend.calls == 3 and spend.input_tokens > 0 and spend.output_tokens > 0
    assert [c["surface"] for c in runner.model_calls()] == [
        "openai.chat", "openai.chat", "anthropic.messages"
    ]
    print("RESULT", events[-1].payload["result"], spend)
    print("SENT", len(OPENAI.seen), len(ANTHROPIC.seen), "TOOL", len(TOOL_RUNS))
"""


@pytest.fixture
def suite(sample_project):
    pytester = sample_project
    pytester.makeini("[pytest]\n")

    def write(tool: str = "shout") -> None:
        pytester.makepyfile(test_agent=SUITE.replace("{tool}", tool))

    write()
    return write


def _printed(result: pytest.RunResult, tag: str) -> str:
    return next(line[line.index(tag) :] for line in result.outlines if tag in line)


def test_an_agent_recorded_once_replays_offline_through_the_real_sdks(pytester, suite):
    recorded = pytester.runpytest("-s", "--pyrula-record-mode=once")
    recorded.assert_outcomes(passed=1)
    assert _printed(recorded, "SENT") == "SENT 2 1 TOOL 1"
    assert (pytester.path / "cassettes" / "test_agent" / "test_triage.json").exists()
    replayed = pytester.runpytest("-s")  # replay only: the network is blocked
    replayed.assert_outcomes(passed=1)
    assert _printed(replayed, "SENT") == "SENT 0 0 TOOL 1"  # the tool runs: a new run
    assert _printed(replayed, "RESULT") == _printed(recorded, "RESULT")


def test_an_agent_never_recorded_fails_with_the_record_advice(pytester, suite):
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "ReplayMiss: cassette 'cassettes/test_agent/test_triage.json' is empty*"
            "--pyrula-record-mode=once`."
        ]
    )
    # The failure's own report is a few lines, not a traceback through the transport (the
    # session's header and warnings around it vary with the environment).
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "= FAILURES =" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("="))
    assert end - start < 8, "\n".join(lines[start:end])
