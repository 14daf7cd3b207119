"""The pages over a store, read as HTML: refusals carry the CLI's messages, links resolve."""

from __future__ import annotations

import html
from pathlib import Path

from starlette.testclient import TestClient

from pyrula.agents import AgentContext, AgentLimits, agent
from pyrula.journal.store import Store
from pyrula.runtime import submit
from pyrula.ui import create_app
from pyrula.workflows import WorkflowContext, workflow
from tests.cli.support import SECRET
from tests.fakes.openai_api import SMALL_USAGE
from tests.runtime.support import ask, async_openai, chat_upstream, run_to_rest

UPSTREAM = chat_upstream()


@agent(name="ui_capped", limits=AgentLimits(max_llm_calls=5, max_total_tokens=10_000))
async def capped(ctx: AgentContext, ticket: str) -> str:
    client = async_openai(UPSTREAM)
    return await ask(client, await ask(client, f"summarise {ticket}"))


@workflow(name="ui_uncapped")
async def uncapped(ctx: WorkflowContext, ticket: str) -> str:
    return await ask(async_openai(UPSTREAM), f"summarise {ticket}")


def test_an_action_the_run_cannot_take_is_refused_with_the_clis_message(store: Path) -> None:
    handle = submit("asks", store=Store(store, create=False))  # queued: not waiting for answers
    with TestClient(create_app(store)) as client:
        page = client.post(f"/runs/{handle.id}/answer", data={"value": "yes"})
        assert page.status_code == 409
        assert f"run {handle.id} is not waiting for an answer (status queued)" in page.text
        missing = client.post("/runs/run_nope/cancel")
        assert missing.status_code == 404
        assert "no run &#39;run_nope&#39;" in missing.text


def test_an_exchange_named_by_its_id_opens_and_an_unknown_one_is_not_found(store: Path) -> None:
    with TestClient(create_app(store)) as client:
        listed = client.get("/exchanges?cassette=chat-stream").text
        key = listed.split('href="/exchange/', 1)[1].split('"', 1)[0]
        detail = client.get(f"/exchange/{key}").text
        record_id = detail.split('<td class="mono">', 1)[1].split("<", 1)[0]
        found = client.get(f"/exchanges/id/{record_id[:10]}", follow_redirects=False)
        assert found.headers["location"] == f"/exchange/{key}"
        assert client.get("/exchanges/id/ffffffffff").status_code == 404
        assert client.get("/exchange/00ff").status_code == 404
        assert client.get("/diff?key=00").status_code == 400


def test_recorded_text_is_shown_as_text_never_as_markup(tmp_path: Path, store: Path) -> None:
    handle = submit("asks", "<script>alert(1)</script>", store=Store(store, create=False))
    with TestClient(create_app(store)) as client:
        page = client.get(f"/runs/{handle.id}").text
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;" in page or "\\u003cscript" in page


def test_a_plain_exchange_shows_its_conversation_and_reply_and_no_credential(
    store: Path,
) -> None:
    with TestClient(create_app(store)) as client:
        listed = client.get("/exchanges?cassette=chat&text=Ping").text
        assert listed.count('href="/exchange/') == 1
        key = listed.split('href="/exchange/', 1)[1].split('"', 1)[0]
        page = html.unescape(client.get(f"/exchange/{key}").text)
    assert "Ping?" in page  # the user's turn
    assert '"content": "Answer to Ping?"' in page  # the reply, indented JSON
    assert f"= {SMALL_USAGE['total_tokens']} tokens" in page  # the usage the reply reported
    assert SECRET not in page  # the provider echoed the key back; the store never kept it


def test_an_agents_spend_is_shown_against_its_caps_and_a_workflow_shows_none(
    store: Path,
) -> None:
    agent_run = run_to_rest(capped, "T-7", store=Store(store, create=False))
    workflow_run = run_to_rest(uncapped, "T-8", store=Store(store, create=False))
    tokens = sum(e.payload["total_tokens"] for e in agent_run.events() if e.type == "llm:done")
    assert tokens > 0
    with TestClient(create_app(store)) as client:
        page = client.get(f"/runs/{agent_run.id}").text
        plain = client.get(f"/runs/{workflow_run.id}").text
        listed = client.get("/runs").text
    # The run's facts: each cap with the spend against it.
    assert "max_llm_calls: spent 2 of 5 model calls (40%)" in page
    assert f"max_total_tokens: spent {tokens} of 10000 tokens" in page
    # The timeline: the spend accumulating against the cap, call by call.
    assert "1 of 5 model calls" in page
    assert "max_cost_usd" not in page  # a cap the agent did not set is not shown
    assert "of 5 model calls" not in plain
    assert "none (only an <code>@agent</code>" in plain
    agent_row = listed.split(agent_run.id, 1)[1].split("</tr>", 1)[0]
    assert "2 of 5 model calls" in agent_row
    assert f"{tokens} of 10000 tokens" in agent_row
    assert "no caps" in listed.split(workflow_run.id, 1)[1].split("</tr>", 1)[0]
