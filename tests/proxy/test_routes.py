"""Which path goes to which provider, and which paths are refused (proxy/routes.py)."""

from __future__ import annotations

import pytest
from pyrula.proxy import DEFAULT_ROUTES, ConfigError, Route, parse_route
from pyrula.proxy.routes import UPSTREAM, RouteTable, check_base_url

from tests.proxy.support import routes_to


def test_routes_strip_the_prefix_and_keep_path_and_query():
    table = RouteTable(routes_to("https://api.example.com/base", "openai"))
    target = table.resolve(b"/openai/v1/models?limit=2")
    assert target is not None and target.url == "https://api.example.com/base/v1/models?limit=2"
    assert table.resolve(b"/openaix/v1") is None
    assert table.resolve(b"/other") is None
    catch_all = RouteTable((), "http://127.0.0.1:9")
    assert catch_all.resolve(b"//evil.example/x").url == "http://127.0.0.1:9//evil.example/x"


def test_the_default_providers_need_no_configuration():
    table = RouteTable(DEFAULT_ROUTES)
    urls = {
        b"/openai/v1/chat/completions": "https://api.openai.com/v1/chat/completions",
        b"/anthropic/v1/messages": "https://api.anthropic.com/v1/messages",
        b"/gemini/v1beta/models/m:generateContent?alt=sse": (
            "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent?alt=sse"
        ),
    }
    for path, url in urls.items():
        target = table.resolve(path)
        assert target is not None and target.url == url
        assert target.provider == path.split(b"/")[1].decode()


def test_a_target_names_its_route_and_the_upstream_path_without_the_query():
    table = RouteTable([Route("groq", "https://api.groq.com/openai")])
    target = table.resolve(b"/groq/v1/chat/completions?x=1")
    assert target is not None
    assert (target.provider, target.path) == ("groq", "/openai/v1/chat/completions")
    bare = table.resolve(b"/groq")
    assert bare is not None and bare.url == "https://api.groq.com/openai/"


def test_the_longest_prefix_wins_and_a_later_route_replaces_one_of_the_same_name():
    table = RouteTable(
        [
            Route("openai", "https://one.example"),
            Route("openai.eu", "https://eu.example"),
            Route("openai", "https://two.example"),
        ]
    )
    assert [r.upstream for r in table.routes] == ["https://two.example", "https://eu.example"]
    eu = table.resolve(b"/openai.eu/v1/models")
    assert eu is not None and eu.url == "https://eu.example/v1/models"
    plain = table.resolve(b"/openai/v1/models")
    assert plain is not None and plain.url == "https://two.example/v1/models"


def test_an_unknown_path_is_refused_unless_a_catch_all_upstream_takes_it():
    routed = RouteTable(DEFAULT_ROUTES)
    assert routed.resolve(b"/nosuchprovider/v1/chat/completions") is None
    assert routed.resolve(b"/") is None
    catch_all = RouteTable([Route("openai", "https://api.openai.com")], "https://llm.internal/api")
    target = catch_all.resolve(b"/v1/chat/completions")
    assert target is not None and target.provider == UPSTREAM
    assert target.url == "https://llm.internal/api/v1/chat/completions"
    assert catch_all.describe() == [
        ("/openai/", "https://api.openai.com"),
        ("/*", catch_all.upstream),
    ]


def test_a_route_option_parses_or_names_the_fix():
    assert parse_route("mistral=https://api.mistral.ai/") == Route(
        "mistral", "https://api.mistral.ai"
    )
    assert parse_route(" ollama = http://127.0.0.1:11434/v1 ").upstream == (
        "http://127.0.0.1:11434/v1"
    )
    with pytest.raises(ConfigError, match="NAME=URL"):
        parse_route("mistral")
    with pytest.raises(ConfigError, match="http"):
        parse_route("x=ftp://host")


@pytest.mark.parametrize("name", ["Upper", "upstream", "_pyrula", "has space", "a/b", "x" * 64, ""])
def test_a_route_name_must_be_a_plain_path_segment(name):
    with pytest.raises(ConfigError, match="path prefix"):
        parse_route(f"{name}=https://example.com")


@pytest.mark.parametrize(
    ("url", "fix"),
    [
        ("api.example.com", "http:// or https://"),
        ("https://", "http:// or https://"),
        ("https://example.com/v1?key=1", "query"),
        ("https://example.com/#x", "fragment"),
        ("https://user:pw@example.com", "credentials"),
        ("http://example.com:99999", "not a URL"),
    ],
)
def test_a_base_url_the_proxy_cannot_forward_to_is_refused(url, fix):
    with pytest.raises(ConfigError, match=fix):
        check_base_url(url, "--upstream")


def test_a_base_url_is_normalised():
    assert (
        check_base_url("HTTPS://API.Example.com:443/v1/", "x") == "https://api.example.com:443/v1"
    )
    assert check_base_url("http://[::1]:8000", "x") == "http://[::1]:8000"
