"""A run's model calls can be followed to their reply bodies: `llm:done` names its exchange,
`pyrula runs show` lists the calls, `pyrula journal ls --run` and `show` take the ids."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pyrula.agents import AgentContext, AgentLimits, agent
from pyrula.cli.app import app
from tests.runtime.support import ask, async_openai, chat_upstream, run_to_rest

UPSTREAM = chat_upstream()


async def _twice() -> str:
    client = async_openai(UPSTREAM)
    return await ask(client, "in a step, first") + await ask(client, "in a step, second")


@agent(name="followable", limits=AgentLimits(max_llm_calls=10))
async def followable(ctx: AgentContext) -> str:
    top = await ask(async_openai(UPSTREAM), "from the body")
    return top + await ctx.step("two calls", _twice)


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_a_runs_model_calls_lead_to_their_exchanges():
    handle = run_to_rest(followable)
    store = str(handle.run_store.store.path)
    done = [e.payload for e in handle.events() if e.type == "llm:done"]

    journaled = [d for d in done if d["within"] == "run"]
    in_step = [d for d in done if d["within"] == "step"]
    assert len(journaled) == 1 and journaled[0]["exchange"]
    assert [d["call_index"] for d in in_step] == [0, 1]  # metered, not journaled
    assert all("exchange" not in d for d in in_step)

    listed = json.loads(_cli("journal", "ls", "--run", handle.id, "--store", store, "--json"))
    assert [row["id"] for row in listed] == [journaled[0]["exchange"]]

    shown = _cli("runs", "show", handle.id, "--store", store)
    assert journaled[0]["exchange"][:12] in shown
    assert "#1 (step)" in shown
    assert "max_llm_calls: spent 3 of 10 model calls" in shown  # the cap kept in its record

    body = _cli("journal", "show", journaled[0]["exchange"][:12], "--store", store)
    assert "from the body" in body


def test_ls_names_the_run_that_journaled_a_call_where_a_cassette_would_be():
    handle = run_to_rest(followable)
    store = str(handle.run_store.store.path)

    table = _cli("journal", "ls", "--store", store)
    header, row = table.splitlines()[:2]
    assert header.split()[1] == "cassette/run"
    assert row.split()[1] == handle.id

    listed = json.loads(_cli("journal", "ls", "--store", store, "--json"))
    assert [(row["run"], row["namespace"]) for row in listed] == [(handle.id, "")]
