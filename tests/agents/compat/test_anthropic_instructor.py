"""instructor over the Anthropic drop-in: journal first, then `instructor.from_anthropic`."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pydantic
import pytest

from pyrula.agents import AgentContext
from pyrula.agents.compat import Anthropic, AsyncAnthropic, journaled
from tests.agents.compat.support import park_and_resume
from tests.fakes.anthropic_api import MSG, anthropic_message
from tests.fakes.provider import ANTHROPIC_LIB, Upstream, json_reply

instructor = pytest.importorskip("instructor")


class User(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(ge=0)


_BAD, _GOOD = {"name": "Ada", "age": -1}, {"name": "Ada", "age": 36}


def _answer(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
    """A model that gets it wrong first: a reask (more than one message) gets the right age."""
    body = json.loads(request.content)
    data = _GOOD if len(body["messages"]) > 1 else _BAD
    message = anthropic_message("")
    if body.get("tools"):
        name = body["tools"][0]["name"]
        message["content"] = [{"type": "tool_use", "id": "toolu_1", "name": name, "input": data}]
        message["stop_reason"] = "tool_use"
    else:
        message["content"] = [{"type": "text", "text": json.dumps(data)}]
    return json_reply(message)


def _stub() -> Upstream:
    return Upstream(ANTHROPIC_LIB, _answer)


def _sync(stub: Upstream, cls: Any = Anthropic) -> Any:
    http = ANTHROPIC_LIB.Client(transport=stub.transport())
    return cls(api_key="k", base_url="http://anthropic.test", http_client=http, max_retries=0)


def _async(stub: Upstream, cls: Any = AsyncAnthropic) -> Any:
    http = ANTHROPIC_LIB.AsyncClient(transport=stub.transport())
    return cls(api_key="k", base_url="http://anthropic.test", http_client=http, max_retries=0)


_ASK = {"model": MSG["model"], "max_tokens": 64, "messages": MSG["messages"]}
MODES = {"TOOLS": instructor.Mode.ANTHROPIC_TOOLS, "JSON": instructor.Mode.ANTHROPIC_JSON}


def _journaled_twice(body: Any, name: str, stub: Upstream) -> list[Any]:
    results: list[Any] = []

    async def recorded(ctx: AgentContext) -> None:
        results.append((await body(ctx)).model_dump())

    park_and_resume(recorded, name)
    assert results[0] == results[1]
    return results


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_reask_is_journaled_with_the_sync_client_on_a_thread(mode):
    stub = _stub()
    patched = instructor.from_anthropic(_sync(stub), mode=MODES[mode])

    async def body(ctx: AgentContext) -> Any:
        return await ctx.to_thread(
            lambda: patched.messages.create(response_model=User, max_retries=2, **_ASK)
        )

    results = _journaled_twice(body, f"instructor_anthropic_sync_{mode}", stub)
    assert results[0] == _GOOD
    assert len(stub.calls) == 2  # the first try and the reask; the resume sent nothing
    assert len(stub.calls[1]["messages"]) > 1  # the reask text is part of what was asked


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_reask_is_journaled_with_the_async_client(mode):
    stub = _stub()
    patched = instructor.from_anthropic(_async(stub), mode=MODES[mode])

    async def body(ctx: AgentContext) -> Any:
        return await patched.messages.create(response_model=User, max_retries=2, **_ASK)

    results = _journaled_twice(body, f"instructor_anthropic_async_{mode}", stub)
    assert results[0] == _GOOD and len(stub.calls) == 2


def test_beta_tools_send_beta_messages_create_journaled():
    stub = _stub()
    patched = instructor.from_anthropic(_async(stub), mode=MODES["TOOLS"], beta=True)

    async def body(ctx: AgentContext) -> Any:
        return await patched.messages.create(response_model=User, max_retries=2, **_ASK)

    results = _journaled_twice(body, "instructor_anthropic_beta", stub)
    assert results[0] == _GOOD and len(stub.calls) == 2


def test_journaled_sdk_client_under_instructor_is_journaled():
    stub = _stub()
    http = ANTHROPIC_LIB.AsyncClient(transport=stub.transport())
    client = anthropic.AsyncAnthropic(api_key="k", base_url="http://a.test", http_client=http)
    patched = instructor.from_anthropic(journaled(client), mode=MODES["TOOLS"])

    async def body(ctx: AgentContext) -> Any:
        return await patched.messages.create(response_model=User, max_retries=2, **_ASK)

    _journaled_twice(body, "instructor_anthropic_converted", stub)
    assert len(stub.calls) == 2


def test_journaled_after_instructor_still_journals_at_the_transport():
    stub = _stub()
    http = ANTHROPIC_LIB.AsyncClient(transport=stub.transport())
    client = anthropic.AsyncAnthropic(api_key="k", base_url="http://a.test", http_client=http)
    patched = instructor.from_anthropic(client, mode=MODES["TOOLS"])
    journaled(client)

    async def body(ctx: AgentContext) -> Any:
        return await patched.messages.create(response_model=User, max_retries=2, **_ASK)

    # instructor kept the SDK's own `messages.create`, which skips the surface table and the
    # one-position-per-call framing; the client's transport, converted in place, still journals
    # each request by position, so the resume replays them.
    _journaled_twice(body, "instructor_anthropic_late", stub)
    assert len(stub.calls) == 2


def test_journaled_refuses_an_instructor_client():
    patched = instructor.from_anthropic(_sync(_stub(), anthropic.Anthropic))
    with pytest.raises(TypeError, match=r"from_anthropic\(journaled\(client\)\)"):
        journaled(patched)


def _tool_stream(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
    body = json.loads(request.content)
    if not body.get("stream"):
        return _answer(request)

    def event(name: str, **data: Any) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    message = {**anthropic_message(""), "content": [], "stop_reason": None}
    block = {"type": "tool_use", "id": "toolu_1", "name": body["tools"][0]["name"], "input": {}}
    text = json.dumps(_GOOD)
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    frames = [
        event("message_start", message=message),
        event("content_block_start", index=0, content_block=block),
        *(
            event(
                "content_block_delta",
                index=0,
                delta={"type": "input_json_delta", "partial_json": p},
            )
            for p in pieces
        ),
        event("content_block_stop", index=0),
        event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9}),
        event("message_stop"),
    ]
    return 200, {"content-type": "text/event-stream"}, frames


def test_create_partial_streams_are_journaled_with_the_sync_client():
    stub = Upstream(ANTHROPIC_LIB, _tool_stream)
    patched = instructor.from_anthropic(_sync(stub), mode=MODES["TOOLS"])

    async def body(ctx: AgentContext) -> Any:
        def partials() -> list[dict[str, Any]]:
            stream = patched.messages.create_partial(response_model=User, **_ASK)
            return [p.model_dump() for p in stream]

        return _Dumped(await ctx.to_thread(partials))

    results = _journaled_twice(body, "instructor_anthropic_partial", stub)
    assert results[0][-1] == _GOOD and len(results[0]) > 1 and len(stub.calls) == 1


class _Dumped(list):  # type: ignore[type-arg]
    def model_dump(self) -> list[Any]:
        return list(self)


def test_the_bedrock_drop_in_composes_with_a_reask():
    pytest.importorskip("botocore")
    from pyrula.agents.compat import AsyncAnthropicBedrock

    stub = _stub()
    client = AsyncAnthropicBedrock(
        aws_region="us-east-1",
        aws_access_key="AKIAPLANTEDKEY000000",
        aws_secret_key="planted-secret",
        base_url="http://bedrock.test",
        http_client=ANTHROPIC_LIB.AsyncClient(transport=stub.transport()),
        max_retries=0,
    )
    patched = instructor.from_anthropic(client, mode=MODES["TOOLS"])
    ask = {**_ASK, "model": "anthropic.claude-haiku-4-5-20251001-v1:0"}

    async def body(ctx: AgentContext) -> Any:
        return await patched.messages.create(response_model=User, max_retries=2, **ask)

    results = _journaled_twice(body, "instructor_anthropic_bedrock", stub)
    assert results[0] == _GOOD and len(stub.calls) == 2
