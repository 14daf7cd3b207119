"""Inside a run, the OpenAI drop-in pointed at each OpenAI-compatible provider is metered from
that provider's own usage fields, and priced only where the price table has its model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pyrula.agents import AgentContext, agent
from pyrula.agents.compat.openai import AsyncOpenAI
from pyrula.agents.testing.runner import AgentRunner
from pyrula.runtime.metering import Usage, prices
from tests.fakes.provider import OPENAI_LIB, Upstream
from tests.replies.support import ASK, PROVIDERS, Compatible, by_name, completion, stream


def _upstream(provider: Compatible) -> Upstream:
    def reply(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
        if json.loads(request.content).get("stream"):
            return 200, {"content-type": "text/event-stream"}, stream(provider)
        body = json.dumps(completion(provider)).encode()
        return 200, {"content-type": "application/json"}, [body]

    return Upstream(OPENAI_LIB, reply)


# The stand-in each run's client sends to, by provider name (a run's input must be JSON).
_UPSTREAMS: dict[str, Upstream] = {}


@agent(name="tests.replies.ask_a_compatible_provider")
async def ask_twice(ctx: AgentContext, name: str) -> str:
    provider = by_name(name)
    client = AsyncOpenAI(
        api_key="sk-unused",
        base_url=provider.base_url,
        http_client=OPENAI_LIB.AsyncClient(transport=_UPSTREAMS[name].transport()),
        max_retries=0,
    )
    plain = await client.chat.completions.create(model=provider.model, messages=ASK)  # type: ignore[arg-type]
    chunks = await client.chat.completions.create(
        model=provider.model,
        messages=ASK,  # type: ignore[arg-type]
        stream=True,
    )
    async for _chunk in chunks:
        pass
    return plain.choices[0].message.content or ""


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_each_call_is_metered_from_the_providers_usage(provider):
    _UPSTREAMS[provider.name] = _upstream(provider)
    events = asyncio.run(AgentRunner(ask_twice).run(provider.name))
    assert events[-1].payload["result"] == "The pyrula fig shell."
    done = [e.payload for e in events if e.type == "llm:done"]
    assert [d["surface"] for d in done] == ["openai.chat", "openai.chat"]
    for payload, expected in zip(done, (provider.usage, provider.streamed_usage), strict=True):
        counts = (payload["input_tokens"], payload["output_tokens"], payload["cache_read_tokens"])
        assert counts == expected
        assert payload["model"] == provider.model and not payload["estimated"]
        inp, out, cached = expected
        assert payload["cost_usd"] == prices.cost(Usage(provider.model, inp, out, cached))


def test_only_a_model_the_price_table_knows_is_priced():
    priced = {p.name for p in PROVIDERS if prices.row(p.model) is not None}
    assert priced == {"openrouter"}  # openai/gpt-4o-mini: OpenAI's own row; the rest unpriced
