"""instructor over the Gemini drop-in (`GENAI_TOOLS` mode): journal first, then
`instructor.from_genai`; each attempt, a reask after a validation error included, is its own
journaled `generate_content`, replayed with no request."""

from __future__ import annotations

import json
from typing import Any

import google.genai
import pytest

from pyrula.agents import AgentContext
from pyrula.agents.compat import genai
from tests.agents.compat.support import User, park_and_resume
from tests.fakes.gemini_api import MODEL, make_client, response, upstream
from tests.fakes.provider import json_reply

instructor = pytest.importorskip("instructor")
pytest.importorskip("jsonref", reason="instructor needs it for Gemini: instructor[google-genai]")


def _reply(request: Any) -> Any:
    """A function call with a name the validator rejects, then (on the reask) a good one."""
    body = json.loads(request.content)
    reasked = len(body["contents"]) > 1
    declaration = body["tools"][0]["functionDeclarations"][0]["name"]
    call = {"name": declaration, "args": {"name": "ADA" if reasked else "Ada", "age": 36}}
    payload = response()
    payload["candidates"][0]["content"] = {"role": "model", "parts": [{"functionCall": call}]}
    return json_reply(payload)


def _build(stub: Any, order: str) -> Any:
    if order == "drop-in":
        return make_client(stub)
    return genai.journaled(make_client(stub, cls=google.genai.Client))


@pytest.mark.parametrize("order", ["drop-in", "journaled"])
@pytest.mark.parametrize("aio", [True, False], ids=["aio", "sync"])
def test_instructor_genai_tools_composes_when_journaling_comes_first(order, aio):
    stub = upstream(_reply)
    results: list[Any] = []
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "Ada is 36."}]}

    async def body(ctx: AgentContext) -> None:
        client = instructor.from_genai(
            _build(stub, order), mode=instructor.Mode.GENAI_TOOLS, use_async=aio
        )
        if aio:
            user = await client.create(response_model=User, max_retries=2, **ask)
        else:
            user = await ctx.to_thread(
                lambda: client.create(response_model=User, max_retries=2, **ask)
            )
        results.append(user.model_dump())

    park_and_resume(body, f"genai_instructor_{order}_{aio}")
    assert len(stub.seen) == 2, stub.seen  # the attempt and its reask, once each
    assert results == [{"name": "ADA", "age": 36}] * 2
