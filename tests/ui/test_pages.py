"""The pages over a store, read as HTML: refusals carry the CLI's messages, links resolve."""

from __future__ import annotations

import html
from pathlib import Path

from starlette.testclient import TestClient

from pyrula.journal.store import Store
from pyrula.runtime import submit
from pyrula.ui import create_app
from tests.cli.support import SECRET
from tests.fakes.openai_api import SMALL_USAGE


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
