"""`pyrula import-vcr` on cassettes that real vcrpy recorded through the real OpenAI, Anthropic
and google-genai SDKs against the stand-in (a socket server), plain and streamed: every
interaction replays offline, with the stand-in stopped, into objects equal to the live ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anthropic
import openai
import pytest
from typer.testing import CliRunner

import pyrula
from pyrula.cli.app import app
from pyrula.journal.vcr_import import convert
from tests.fakes import anthropic_api, gemini_api, openai_api
from tests.fakes.provider import (
    ANTHROPIC_LIB,
    GENAI_LIB,
    OPENAI_LIB,
    TEST_KEY,
    ask,
    journal_transport,
    sdk_client,
)
from tests.fakes.server import Server, serving

vcr = pytest.importorskip("vcr")

Calls = Callable[[str, Any], list[Any]]


def _openai(base: str, http_client: Any) -> list[Any]:
    client = openai.OpenAI(api_key=TEST_KEY, base_url=base + "/v1", http_client=http_client)
    plain = client.chat.completions.create(model="gpt-4o-mini", messages=ask("hi"))
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=ask("hi"), stream=True)
    again = client.chat.completions.create(model="gpt-4o-mini", messages=ask("hi"))
    return [plain.model_dump(), [c.model_dump() for c in stream], again.model_dump()]


def _anthropic(base: str, http_client: Any) -> list[Any]:
    client = anthropic.Anthropic(api_key=TEST_KEY, base_url=base, http_client=http_client)
    plain = client.messages.create(model="claude-x", max_tokens=9, messages=ask("hi"))
    with client.messages.stream(model="claude-x", max_tokens=9, messages=ask("hi")) as events:
        streamed = [e.model_dump() for e in events]
    return [plain.model_dump(), streamed]


def _gemini(base: str, http_client: Any) -> list[Any]:
    from google import genai

    options: dict[str, Any] = {"base_url": base}
    if http_client is not None:
        options["client_args"] = {"transport": journal_transport(GENAI_LIB, None)}
    client = genai.Client(api_key=TEST_KEY, http_options=options)
    plain = client.models.generate_content(model=gemini_api.MODEL, contents="hi")
    chunks = client.models.generate_content_stream(model=gemini_api.MODEL, contents="hi")
    drop = {"sdk_http_response"}
    return [plain.model_dump(exclude=drop), [c.model_dump(exclude=drop) for c in chunks]]


PROVIDERS: dict[str, tuple[Callable[[Any], Any], Callable[[str, Any], list[Any]], Any]] = {
    "openai": (openai_api.upstream().reply, _openai, OPENAI_LIB),
    "anthropic": (anthropic_api.upstream().reply, _anthropic, ANTHROPIC_LIB),
    "gemini": (gemini_api.upstream().reply, _gemini, GENAI_LIB),
}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_vcrpy_cassette_replays_offline_into_equal_objects(tmp_path, provider):
    reply, calls, lib = PROVIDERS[provider]
    yaml_path = tmp_path / "cassettes" / "test_module" / f"test_{provider}.yaml"
    with Server(serving(reply)) as server, vcr.use_cassette(str(yaml_path)):
        base = server.url
        live = calls(base, None)
    assert TEST_KEY in yaml_path.read_text() or provider == "gemini"  # vcrpy keeps the key

    (result,) = convert([tmp_path / "cassettes"])
    assert result.skipped == [] and result.converted == len(live)
    text_path = yaml_path.with_suffix(".json")
    assert result.target == text_path
    assert TEST_KEY not in text_path.read_text()  # scrubbed as the store is
    frames = [e["reply"] for e in json.loads(text_path.read_text())["exchanges"]]
    assert any(len(r.get("frames", [])) >= 2 for r in frames)  # the stream split back up

    # Offline: the stand-in is gone; the same SDK code, over Pyrula's transport.
    transport = lib.Client(transport=journal_transport(lib, None))  # the SDK's own stack
    with pyrula.cassette(provider, mode="none", path=text_path, store=tmp_path / "cache"):
        assert calls(base, transport) == live


def test_what_cannot_be_converted_is_reported_with_its_reason(tmp_path):
    good = {
        "request": {
            "method": "POST",
            "uri": "https://api.openai.com/v1/chat/completions",
            "body": json.dumps({"model": "m", "messages": ask("x")}),
            "headers": {"Authorization": [f"Bearer {TEST_KEY}"]},
        },
        "response": {
            "status": {"code": 200, "message": "OK"},
            "headers": {"Content-Type": ["application/json"], "Content-Encoding": ["br"]},
            "body": {"string": b"\x8b\x00\x80binary"},
        },
    }
    broken = {"request": {"method": "GET"}, "response": {}}
    fine = json.loads(json.dumps({**good, "response": {**good["response"], "body": {}}}))
    fine["response"]["headers"] = {"Content-Type": ["application/json"]}
    fine["response"]["body"] = {"string": '{"ok": true}'}
    import yaml

    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump({"interactions": [good, broken, fine], "version": 1}))
    (tmp_path / "not-a-cassette.yml").write_text("just: text\n")
    result = CliRunner().invoke(app, ["import-vcr", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert f"{path}: 1 converted -> {tmp_path / 'mixed.json'}" in lines
    assert any("interaction 0: its body is br-encoded" in line for line in lines)
    assert any(line.startswith("  not converted: interaction 1:") for line in lines)
    assert any("not a vcrpy cassette" in line for line in lines)
    assert lines[-1] == "1 interaction(s) converted in 2 file(s); 3 not converted"


def test_vcr_markers_are_honoured_on_request(sample_project):
    pytester = sample_project
    pytester.makeini("[pytest]\npyrula_vcr_markers = true\n")
    pytester.makepyfile(
        test_moved="""
import pytest
from tests.fakes.openai_api import openai_client, upstream
from tests.fakes.provider import ask

@pytest.mark.vcr
def test_moved():
    openai_client(upstream()).chat.completions.create(model="m", messages=ask("x"))
"""
    )
    result = pytester.runpytest("-p", "no:recording")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["ReplayMiss: cassette 'cassettes/test_moved/test_moved.json'*"])


FAKES = Path(__file__).parents[1] / "fakes"
# vcrpy 6.0.2, 7.0.0 and 8.5.0 through the httpx SDKs; 8.5.0 also through the httpx2 ones.
RECORDED = ["vcrpy6", "vcrpy7", "vcrpy8", "vcrpy8/httpx2"]
OLDER = [
    (folder, provider) for folder in RECORDED for provider in ("anthropic", "gemini", "openai")
]


@pytest.mark.parametrize(("folder", "provider"), OLDER)
def test_cassettes_of_an_older_vcrpy_major_replay_into_equal_objects(tmp_path, folder, provider):
    import yaml

    source = tmp_path / f"test_{provider}.yaml"
    source.write_bytes((FAKES / folder / source.name).read_bytes())
    (result,) = convert([source])
    assert result.skipped == [] and result.converted == 2
    assert TEST_KEY not in result.target.read_text()  # scrubbed as the store is
    uri = urlsplit(yaml.safe_load(source.read_text())["interactions"][0]["request"]["uri"])
    base = f"{uri.scheme}://{uri.netloc}"

    def calls(journaled: bool) -> tuple[list[Any], Any]:
        if provider == "openai":
            stub = openai_api.upstream()
            client = openai_api.openai_client(stub, base_url=base + "/v1", journaled=journaled)
            plain = client.chat.completions.create(model="gpt-4o-mini", messages=ask("hi"))
            stream = client.chat.completions.create(
                model="gpt-4o-mini", messages=ask("hi"), stream=True
            )
            return [plain.model_dump(), [c.model_dump() for c in stream]], stub
        if provider == "gemini":
            from google import genai

            stub = gemini_api.upstream()
            inner = stub.transport()
            transport = journal_transport(GENAI_LIB, inner) if journaled else inner
            options = {"base_url": base, "client_args": {"transport": transport}}
            gemini = genai.Client(api_key=TEST_KEY, http_options=options)
            drop = {"sdk_http_response"}
            reply = gemini.models.generate_content(model=gemini_api.MODEL, contents="hi")
            chunks = gemini.models.generate_content_stream(model=gemini_api.MODEL, contents="hi")
            return [
                reply.model_dump(exclude=drop),
                [c.model_dump(exclude=drop) for c in chunks],
            ], stub
        stub = anthropic_api.upstream()
        client = sdk_client(
            stub, anthropic.Anthropic, anthropic.AsyncAnthropic, base, journaled=journaled
        )
        plain = client.messages.create(model="claude-x", max_tokens=9, messages=ask("hi"))
        with client.messages.stream(model="claude-x", max_tokens=9, messages=ask("hi")) as events:
            return [plain.model_dump(), [e.model_dump() for e in events]], stub

    live, _ = calls(journaled=False)
    with pyrula.cassette(provider, mode="none", path=result.target, store=tmp_path / "cache"):
        replayed, stub = calls(journaled=True)
    assert replayed == live and stub.seen == []


def test_each_value_of_a_repeated_credential_header_is_masked_in_the_import(tmp_path):
    import yaml

    first, second = "session=first-vcr-cookie-0123", "theme=second-vcr-cookie-4567"
    echo = json.dumps({"choices": [], "seen": [first, second]})
    interaction = {
        "request": {
            "method": "POST",
            "uri": "https://api.openai.com/v1/chat/completions",
            "body": json.dumps({"model": "m", "messages": ask("x")}),
            "headers": {"Authorization": [f"Bearer {TEST_KEY}"], "Cookie": [first, second]},
        },
        "response": {
            "status": {"code": 200, "message": "OK"},
            "headers": {"Content-Type": ["application/json"]},
            "body": {"string": echo},
        },
    }
    (tmp_path / "cookies.yaml").write_text(yaml.safe_dump({"interactions": [interaction]}))
    result = CliRunner().invoke(app, ["import-vcr", str(tmp_path)])
    assert result.exit_code == 0, result.output
    kept = (tmp_path / "cookies.json").read_text()
    assert "[scrubbed]" in kept
    for secret in (first, second, TEST_KEY):
        assert secret not in kept, f"{secret!r} was kept"
