"""Who may use the page: loopback by default, a token off loopback, no cross-site changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from pyrula.errors import UIConfigError
from pyrula.ui import UIConfig, create_app
from pyrula.ui.serve import parse_listen

TOKEN = "a-long-enough-token-0123"


def test_listening_off_loopback_needs_a_token() -> None:
    with pytest.raises(UIConfigError, match="--token"):
        UIConfig(host="0.0.0.0")
    with pytest.raises(UIConfigError, match="at least 16 characters"):
        UIConfig(host="0.0.0.0", token="short")
    assert UIConfig(host="0.0.0.0", token=TOKEN).address().endswith(f"/?token={TOKEN}")
    assert UIConfig(host="127.0.0.1").address() == "http://127.0.0.1:8788/"


def test_listen_addresses_parse_as_host_and_port() -> None:
    assert parse_listen("127.0.0.1:9000") == ("127.0.0.1", 9000)
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    assert parse_listen("[::1]:9001") == ("::1", 9001)
    assert parse_listen("localhost") == ("localhost", 8788)
    with pytest.raises(UIConfigError, match="port must be a number"):
        parse_listen("host:http")


def test_with_a_token_a_request_without_it_is_refused_and_the_link_sets_a_cookie(
    store: Path,
) -> None:
    with TestClient(create_app(store, token=TOKEN)) as client:
        refused = client.get("/exchanges")
        assert refused.status_code == 401
        assert "?token=" in refused.text
        assert client.get("/exchanges", headers={"Authorization": f"Bearer {TOKEN}"}).is_success
        linked = client.get(f"/exchanges?token={TOKEN}", follow_redirects=False)
        assert linked.status_code == 303
        assert "token" not in linked.headers["location"]
        assert client.get("/exchanges").is_success  # the cookie carries it now
    with TestClient(create_app(store, token=TOKEN)) as stranger:
        assert stranger.get(f"/exchanges?token={'x' * 24}").status_code == 401


def test_a_change_posted_from_another_sites_page_is_refused(store: Path) -> None:
    with TestClient(create_app(store)) as client:
        sent = client.post(
            "/runs/run_x/cancel", headers={"Origin": "https://elsewhere.example"}, data={}
        )
        assert sent.status_code == 403
        assert "another site" in sent.text
