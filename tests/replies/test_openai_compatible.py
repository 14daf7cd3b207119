"""The OpenAI-compatible providers through the real OpenAI SDK with a custom `base_url`: each is
recorded from its recorded-shape replies, then replayed offline into equal SDK objects, filed
as `openai.chat` under its own provider name, and metered from its own usage fields."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from pyrula.fingerprints import openai_compatible as fingerprint_rows
from pyrula.fingerprints import surfaces
from pyrula.proxy import DEFAULT_ROUTES
from typer.testing import CliRunner

import pyrula
from pyrula.cli.app import app
from pyrula.journal import Exchanges, Store
from pyrula.replies import openai_compatible as reply_rows
from pyrula.runtime.metering import usage_from_reply
from tests.fakes.provider import OPENAI_LIB, TEST_KEY, Upstream, journal_transport
from tests.replies.support import ASK, PROVIDERS, Compatible, completion, stream


def _upstream(provider: Compatible) -> Upstream:
    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        if json.loads(request.content).get("stream"):
            return 200, {"content-type": "text/event-stream; charset=utf-8"}, stream(provider)
        body = json.dumps(completion(provider)).encode()
        return 200, {"content-type": "application/json"}, [body]

    return Upstream(OPENAI_LIB, reply)


def _client(provider: Compatible, upstream: Upstream) -> openai.OpenAI:
    http = OPENAI_LIB.Client(transport=journal_transport(OPENAI_LIB, upstream.transport()))
    return openai.OpenAI(
        api_key=TEST_KEY, base_url=provider.base_url, http_client=http, max_retries=0
    )


def _calls(client: openai.OpenAI, model: str) -> tuple[Any, list[Any]]:
    plain = client.chat.completions.create(model=model, messages=ASK)  # type: ignore[arg-type]
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=ASK,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    return plain.model_dump(), [chunk.model_dump() for chunk in chunks]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_recorded_then_replayed_offline_into_equal_sdk_objects(store_path, provider):
    upstream = _upstream(provider)
    with pyrula.cassette(provider.name, store=store_path):
        recorded = _calls(_client(provider, upstream), provider.model)
    assert len(upstream.calls) == 2
    silent = Upstream(OPENAI_LIB, lambda request: pytest.fail("replay reached the provider"))
    with pyrula.cassette(provider.name, mode="none", store=store_path):
        replayed = _calls(_client(provider, silent), provider.model)
    assert replayed == recorded
    assert (
        "".join(c["choices"][0]["delta"]["content"] or "" for c in recorded[1] if c["choices"])
        == "The pyrula fig shell."
    )


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_filed_as_openai_chat_under_the_provider_name_and_metered_from_its_usage(
    store_path, provider
):
    with pyrula.cassette(provider.name, store=store_path):
        _calls(_client(provider, _upstream(provider)), provider.model)
    store = Store(store_path)
    try:
        exchanges = Exchanges(store)
        records = [record for _, record in exchanges.scan()]
        assert {record.surface for record in records} == {surfaces.OPENAI_CHAT}
        for record in records:
            request = exchanges.request(record)
            assert request["meta"]["provider"] == provider.name
            found = exchanges.get(next(k for k, r in exchanges.scan() if r.id == record.id))
            assert found is not None
            body = exchanges.body(*found)
            usage = usage_from_reply(record.surface, body, record.streamed)
            counts = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens)
            assert counts == (provider.streamed_usage if record.streamed else provider.usage)
            assert usage.model == provider.model
    finally:
        store.close()


def test_journal_ls_names_each_provider(store_path):
    for provider in PROVIDERS:
        with pyrula.cassette(provider.name, store=store_path):
            _calls(_client(provider, _upstream(provider)), provider.model)
    result = CliRunner().invoke(app, ["journal", "ls", "--json", "--store", str(store_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {(row["namespace"], row["provider"]) for row in rows} == {
        (p.name, p.name) for p in PROVIDERS
    }
    table = CliRunner().invoke(
        app, ["journal", "ls", "groq", "--store", str(store_path)], env={"COLUMNS": "160"}
    )
    assert "openai.chat (groq)" in table.output


def test_a_fingerprint_does_not_depend_on_the_provider():
    """The same call to Groq and to OpenAI is one fingerprint: `provider` is kept, not compared."""
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    parts = [
        pyrula.fingerprints.RequestParts("POST", url, {}, body)
        for url in (
            "https://api.openai.com/v1/chat/completions",
            "https://api.groq.com/openai/v1/chat/completions",
        )
    ]
    openai_call, groq_call = (pyrula.fingerprints.canonicalize(p) for p in parts)
    assert openai_call.digest == groq_call.digest
    assert "provider" not in openai_call.meta and groq_call.meta["provider"] == "groq"


def test_each_provider_is_one_row_in_each_of_the_three_tables():
    """Adding a provider: a fingerprints row, a replies row and a proxy route, no more."""
    names = [row.name for row in fingerprint_rows.PROVIDERS]
    assert names == [p.name for p in PROVIDERS]
    assert [row.provider for row in reply_rows.DIALECTS] == names
    assert set(names) <= {route.name for route in DEFAULT_ROUTES}


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_journal_show_reassembles_each_stream_into_its_text_once(store_path, provider):
    with pyrula.cassette(provider.name, store=store_path):
        _calls(_client(provider, _upstream(provider)), provider.model)
    listed = CliRunner().invoke(app, ["journal", "ls", "--json", "--store", str(store_path)])
    [streamed] = [row for row in json.loads(listed.output) if row["streamed"]]
    shown = CliRunner().invoke(
        app, ["journal", "show", streamed["id"], "--json", "--store", str(store_path)]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["reply"]["text"] == "The pyrula fig shell."
