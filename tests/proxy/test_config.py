"""`pyrula proxy` settings: what parses, what is refused and why (proxy/config.py)."""

from __future__ import annotations

import pytest
from pyrula.proxy import MODES, ConfigError, Limits, ProxyConfig, Route, parse_listen, parse_route

TOKEN = "t-0123456789abcdef-long-enough"


def test_listen_and_route_options_parse_or_name_the_fix():
    assert parse_listen("127.0.0.1:8787") == ("127.0.0.1", 8787)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen("9000") == ("127.0.0.1", 9000)
    assert parse_route("mistral=https://api.mistral.ai/").upstream == "https://api.mistral.ai"
    with pytest.raises(ConfigError, match="NAME=URL"):
        parse_route("mistral")
    with pytest.raises(ConfigError, match="http"):
        parse_route("x=ftp://host")


def test_listen_takes_a_port_alone_or_with_a_host():
    assert parse_listen(":8000") == ("127.0.0.1", 8000)
    assert parse_listen(" localhost:1 ") == ("localhost", 1)
    assert parse_listen("0.0.0.0:65535") == ("0.0.0.0", 65535)


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("localhost:", "not HOST:PORT"),
        ("[::1]", r"\[::1\]:PORT"),
        ("host:http", "not HOST:PORT"),
        ("70000", "out of range"),
    ],
)
def test_a_listen_address_it_cannot_use_names_the_fix(text, fix):
    with pytest.raises(ConfigError, match=fix):
        parse_listen(text)


def test_a_non_loopback_address_needs_allow_remote_and_a_token(tmp_path):
    with pytest.raises(ConfigError, match="--allow-remote"):
        ProxyConfig(store=tmp_path, host="0.0.0.0")
    with pytest.raises(ConfigError, match="token"):
        ProxyConfig(store=tmp_path, host="0.0.0.0", allow_remote=True)
    with pytest.raises(ConfigError, match="at least"):
        ProxyConfig(store=tmp_path, host="0.0.0.0", allow_remote=True, token="short")
    assert ProxyConfig(store=tmp_path, host="0.0.0.0", allow_remote=True, token=TOKEN).token


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost"])
def test_loopback_needs_no_token(tmp_path, host):
    assert ProxyConfig(store=tmp_path, host=host).token is None


def test_the_defaults_replay_on_loopback(tmp_path):
    config = ProxyConfig(store=tmp_path)
    assert (config.mode, config.host, config.port, config.cassette) == (
        "replay",
        "127.0.0.1",
        8787,
        "proxy",
    )
    assert config.offline and config.journaled and config.cassette_mode == "none"


def test_each_mode_plans_its_cassette(tmp_path):
    plans = {mode: ProxyConfig(store=tmp_path, mode=mode).cassette_mode for mode in MODES}
    assert plans == {"record": "all", "replay": "none", "auto": "new_episodes", "passthrough": None}
    assert not ProxyConfig(store=tmp_path, mode="passthrough").journaled
    assert not ProxyConfig(store=tmp_path, mode="auto").offline


@pytest.mark.parametrize(
    ("settings", "fix"),
    [
        ({"mode": "live"}, "unknown mode 'live'; use one of record, replay, auto, passthrough"),
        ({"cassette": ""}, "1-200 printable"),
        ({"cassette": "a\nb"}, "1-200 printable"),
        ({"cassette": "c" * 201}, "1-200 printable"),
        ({"port": 65536}, "out of range"),
        ({"port": -1}, "out of range"),
        ({"upstream": "localhost:8000"}, "--upstream"),
        ({"token": "short"}, "at least 16"),
    ],
)
def test_a_setting_it_cannot_use_is_refused_naming_the_fix(tmp_path, settings, fix):
    with pytest.raises(ConfigError) as refused:
        ProxyConfig(store=tmp_path, **settings)
    assert fix in str(refused.value)


@pytest.mark.parametrize("name", ["max_body_bytes", "max_header_bytes", "max_connections"])
def test_a_limit_must_be_positive(name):
    with pytest.raises(ConfigError, match=f"{name} must be positive"):
        Limits(**{name: 0})


def test_the_upstream_url_is_normalised(tmp_path):
    config = ProxyConfig(store=tmp_path, upstream="http://127.0.0.1:9000/v1/")
    assert config.upstream == "http://127.0.0.1:9000/v1"


def test_given_routes_add_to_the_defaults_or_replace_one(tmp_path):
    config = ProxyConfig(
        store=tmp_path,
        routes=(Route("openai", "http://127.0.0.1:9"), Route("mistral", "https://api.mistral.ai")),
    )
    table = config.route_table()
    by_name = {route.name: route.upstream for route in table.routes}
    assert by_name["openai"] == "http://127.0.0.1:9"
    assert by_name["mistral"] == "https://api.mistral.ai"
    assert by_name["anthropic"] == "https://api.anthropic.com"


def test_a_catch_all_upstream_drops_the_default_prefixes(tmp_path):
    config = ProxyConfig(
        store=tmp_path, upstream="http://127.0.0.1:9", routes=(Route("x", "https://x.example"),)
    )
    table = config.route_table()
    assert [route.name for route in table.routes] == ["x"]
    target = table.resolve(b"/openai/v1/models")
    assert target is not None and target.url == "http://127.0.0.1:9/openai/v1/models"
