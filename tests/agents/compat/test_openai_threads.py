"""A sync drop-in call on a thread that lost the run's context: not journaled, and it says so."""

from __future__ import annotations

import threading
import warnings

from pyrula.agents import AgentContext, agent
from pyrula.agents.compat.openai import OpenAI
from tests.fakes.provider import OPENAI_LIB
from tests.runtime.support import chat_upstream, run_to_rest

UPSTREAM = chat_upstream()


def _client() -> OpenAI:
    return OpenAI(
        api_key="sk-unused",
        base_url="http://openai.test/v1",
        http_client=OPENAI_LIB.Client(transport=UPSTREAM.transport()),
        max_retries=0,
    )


@agent(name="bare_thread")
async def bare_thread(ctx: AgentContext) -> list[str]:
    client = _client()
    replies: list[str] = []

    def ask() -> None:
        for _ in range(2):  # one call site, two calls: one warning
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "from a bare thread"}]
            )
            replies.append(reply.choices[0].message.content or "")

    thread = threading.Thread(target=ask)
    thread.start()
    await ctx.to_thread(thread.join)
    return replies


def test_a_thread_without_the_run_context_warns_once_per_call_site_and_runs_live():
    UPSTREAM.calls.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = run_to_rest(bare_thread)
    assert handle.record.status == "completed"
    messages = [str(w.message) for w in caught if "ctx.to_thread" in str(w.message)]
    assert len(messages) == 1 and "not journaled" in messages[0]
    assert len(UPSTREAM.calls) == 2
    assert not [e for e in handle.events() if e.type == "llm:done"]
