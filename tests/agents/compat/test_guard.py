"""The guard outside a run: a drop-in inside a cassette is journaled by the cassette, so it does
not warn that its calls are not journaled — and they do replay offline."""

from __future__ import annotations

import asyncio
import warnings

import pytest

import pyrula
from pyrula.agents.compat import _guard
from pyrula.agents.compat.anthropic import Anthropic, AsyncAnthropic
from pyrula.agents.compat.openai import AsyncOpenAI, OpenAI
from tests.fakes import anthropic_api, gemini_api, openai_api
from tests.fakes.provider import ask


def _calls(stubs):
    openai_stub, anthropic_stub, gemini_stub = stubs
    sync_openai = openai_api.openai_client(openai_stub, cls=OpenAI, journaled=False)
    async_openai = openai_api.openai_client(openai_stub, cls=AsyncOpenAI, journaled=False)
    sync_anthropic = anthropic_api.anthropic_client(anthropic_stub, cls=Anthropic, journaled=False)
    async_anthropic = anthropic_api.anthropic_client(
        anthropic_stub, cls=AsyncAnthropic, journaled=False
    )
    gemini = gemini_api.make_client(gemini_stub)
    chat = {"model": "m", "messages": ask("x")}
    message = {"model": "m", "max_tokens": 3, "messages": ask("x")}
    return [
        sync_openai.chat.completions.create(**chat).choices[0].message.content,
        asyncio.run(async_openai.chat.completions.create(**chat)).choices[0].message.content,
        sync_anthropic.messages.create(**message).content[0].text,
        asyncio.run(async_anthropic.messages.create(**message)).content[0].text,
        gemini.models.generate_content(model=gemini_api.MODEL, contents="q").text,
    ]


@pytest.mark.parametrize("mode", ["once", "none"])
def test_a_drop_in_inside_a_cassette_is_journaled_and_does_not_warn(store_path, mode):
    stubs = (openai_api.upstream(), anthropic_api.upstream(), gemini_api.upstream())
    with pyrula.cassette("dropins", store=store_path):
        recorded = _calls(stubs)
    _guard._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pyrula.cassette("dropins", mode=mode, store=store_path):
            replayed = _calls(stubs)
    assert [str(w.message) for w in caught if "not journaled" in str(w.message)] == []
    assert replayed == recorded
    assert [len(stub.seen) for stub in stubs] == [2, 2, 1]  # the first pass only
