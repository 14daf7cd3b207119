"""instructor over the OpenAI drop-in: the spec's order table, each attempt (a reask after a
validation error included) journaled as its own `create`, replayed with no request, in the
chat modes and `RESPONSES_TOOLS`; and `create_partial` streams replayed whole."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from pyrula.agents import AgentContext
from pyrula.agents.compat import openai as compat
from pyrula.journal.exchanges import Exchanges
from tests.agents.compat.support import User, park_and_resume
from tests.fakes.openai_api import (
    chat_completion,
    chat_tool_call_sse,
    function_call_response,
    function_call_sse,
)
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply, sse_reply

instructor = pytest.importorskip("instructor")


_ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Ada is 36."}]}


_PIECES = ['{"name": "A', 'DA", ', '"age": 3', "6}"]


def _upstream() -> Upstream:
    """Answers the first attempt with a name the validator rejects, and a reask with a good one;
    by tool call, by JSON content or (the Responses API) by function call, as the request's mode
    asks. A streamed request gets the good arguments in four pieces."""

    def reply(request: Any) -> Any:
        body = json.loads(request.content)
        responses = request.url.path.endswith("/responses")
        if body.get("stream"):
            name = body["tools"][0]["name" if responses else "function"]
            name = name if responses else name["name"]
            stream = function_call_sse if responses else chat_tool_call_sse
            return sse_reply(stream(name, _PIECES))
        reasked = len(body["input" if responses else "messages"]) > 1
        arguments = json.dumps({"name": "ADA" if reasked else "Ada", "age": 36})
        if responses:
            return json_reply(function_call_response(body["tools"][0]["name"], arguments))
        payload = chat_completion(arguments)
        if body.get("tools"):
            call = {"id": "call_1", "type": "function"}
            call["function"] = {
                "name": body["tools"][0]["function"]["name"],
                "arguments": arguments,
            }
            payload["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}  # fmt: skip  # noqa: E501
            payload["choices"][0]["finish_reason"] = "tool_calls"
        return json_reply(payload)

    return Upstream(OPENAI_LIB, reply)


def _sync_client(stub: Upstream, cls: Any = compat.OpenAI, **kw: Any) -> Any:
    http = OPENAI_LIB.Client(transport=stub.transport())
    return cls(api_key="sk-unused", http_client=http, max_retries=0, **kw)


def _async_client(stub: Upstream) -> Any:
    http = OPENAI_LIB.AsyncClient(transport=stub.transport())
    url = "http://openai.test/v1"
    return compat.AsyncOpenAI(api_key="sk-unused", base_url=url, http_client=http, max_retries=0)


def _journaled_messages(handle: Any) -> list[Any]:
    """The messages each journaled exchange of the run is fingerprinted on, in position order."""
    from pyrula.journal.keys import run_prefix

    exchanges = Exchanges(handle.run_store.store)
    found = exchanges.scan(run_prefix(handle.id))
    compared = [exchanges.request(record)["compared"] for _key, record in sorted(found)]
    return [c.get("messages", c.get("input")) for c in compared]


MODES = ["TOOLS", "JSON_SCHEMA", "RESPONSES_TOOLS"]


@pytest.mark.parametrize("mode", MODES)
def test_a_reask_is_journaled_and_a_resume_replays_both_attempts_sync(mode):
    stub = _upstream()
    users: list[User] = []

    async def body(ctx: AgentContext) -> None:
        client = instructor.from_openai(
            _sync_client(stub, base_url="http://openai.test/v1"), mode=instructor.Mode[mode]
        )

        def extract() -> User:
            return client.chat.completions.create(**_ASK, response_model=User, max_retries=2)

        users.append(await ctx.to_thread(extract))

    handle = park_and_resume(body, f"compat_instructor_sync_{mode}")
    _assert_reasked_once_and_replayed(handle, stub, users)


@pytest.mark.parametrize("mode", MODES)
def test_a_reask_is_journaled_and_a_resume_replays_both_attempts_async(mode):
    stub = _upstream()
    users: list[User] = []

    async def body(ctx: AgentContext) -> None:
        client = instructor.from_openai(_async_client(stub), mode=instructor.Mode[mode])
        users.append(
            await client.chat.completions.create(**_ASK, response_model=User, max_retries=2)
        )

    handle = park_and_resume(body, f"compat_instructor_async_{mode}")
    _assert_reasked_once_and_replayed(handle, stub, users)


def _assert_reasked_once_and_replayed(handle: Any, stub: Upstream, users: list[User]) -> None:
    assert [user.model_dump() for user in users] == [{"name": "ADA", "age": 36}] * 2
    assert len(stub.calls) == 2  # the first try and its reask; the resume sent nothing
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert [d["position"].rsplit("/", 1)[1] for d in done] == ["llm0", "llm1"]
    first, reask = _journaled_messages(handle)
    sent = [call.get("messages", call.get("input")) for call in stub.calls]
    assert first == sent[0] and len(first) == 1
    # The reask's own text (the validator's complaint) is part of what its replay is checked on.
    assert reask == sent[1] and "upper case" in json.dumps(reask[1:])


# -- create_partial: a stream of partial objects, replayed whole -------------------------------


@pytest.mark.parametrize("mode", ["TOOLS", "RESPONSES_TOOLS"])
def test_create_partial_streams_and_a_resume_replays_the_same_partials_sync(mode):
    stub = _upstream()
    partials: list[list[dict[str, Any]]] = []

    async def body(ctx: AgentContext) -> None:
        client = instructor.from_openai(
            _sync_client(stub, base_url="http://openai.test/v1"), mode=instructor.Mode[mode]
        )

        def extract() -> list[dict[str, Any]]:
            stream = client.chat.completions.create_partial(**_ASK, response_model=User)
            return [partial.model_dump() for partial in stream]

        partials.append(await ctx.to_thread(extract))

    handle = park_and_resume(body, f"compat_instructor_partial_{mode}")
    assert len(stub.calls) == 1 and stub.calls[0]["stream"] is True  # the resume sent nothing
    assert partials[0] == partials[1] and len(partials[0]) > 1
    assert partials[0][-1] == {"name": "ADA", "age": 36}
    [done] = [e.payload for e in handle.events() if e.type == "llm:done"]
    assert done["position"] == "thread:main/thread0/llm0" and done["estimated"] is False


# -- the order table --------------------------------------------------------------------------


def _extract_in_thread(build: Any, name: str) -> tuple[Any, Upstream]:
    """Run one instructor extraction on a thread of a run, park, resume: the handle and stub."""
    stub = _upstream()

    async def body(ctx: AgentContext) -> None:
        client = build(stub)
        await ctx.to_thread(
            lambda: client.chat.completions.create(**_ASK, response_model=User, max_retries=2)
        )

    return park_and_resume(body, name), stub


def test_wrapping_the_drop_in_is_journaled():
    def build(stub: Upstream) -> Any:
        return instructor.from_openai(_sync_client(stub, base_url="http://openai.test/v1"))

    _handle, stub = _extract_in_thread(build, "compat_instructor_order_drop_in")
    assert len(stub.calls) == 2


def test_wrapping_a_client_journaled_first_is_journaled():
    def build(stub: Upstream) -> Any:
        client = _sync_client(stub, openai.OpenAI, base_url="http://openai.test/v1")
        return instructor.from_openai(compat.journaled(client))

    _handle, stub = _extract_in_thread(build, "compat_instructor_order_journaled_first")
    assert len(stub.calls) == 2


def test_wrapping_the_azure_drop_in_is_journaled():
    def build(stub: Upstream) -> Any:
        client = _sync_client(
            stub,
            compat.AzureOpenAI,
            api_version="2024-10-21",
            azure_endpoint="https://pyrula-test.openai.azure.com",
        )
        return instructor.from_openai(client)

    handle, stub = _extract_in_thread(build, "compat_instructor_order_azure")
    assert len(stub.calls) == 2
    assert [e.payload["requested_model"] for e in handle.events() if e.type == "llm:done"] == [
        "gpt-4o-mini"
    ] * 2


def test_journaling_after_instructor_wrapped_is_journaled_by_the_transport_only():
    # The spec's table says instructor keeps the SDK's unjournaled `create`, so its calls run
    # live again on every resume. It does keep the SDK's `create`, unguarded, but `journaled()`
    # wraps the client's HTTP transport in place, and that `create` sends through it: each
    # HTTP attempt is journaled by position, without the drop-in's per-call rules.
    def build(stub: Upstream) -> Any:
        client = _sync_client(stub, openai.OpenAI, base_url="http://openai.test/v1")
        patched = instructor.from_openai(client)
        compat.journaled(client)
        return patched

    handle, stub = _extract_in_thread(build, "compat_instructor_order_journaled_after")
    assert len(stub.calls) == 2  # both attempts once: the resume replayed them
    done = [e.payload["position"] for e in handle.events() if e.type == "llm:done"]
    assert done == ["thread:main/thread0/llm0", "thread:main/thread0/llm1"]


def test_journaling_an_instructor_client_is_refused():
    stub = _upstream()
    patched = instructor.from_openai(_sync_client(stub, openai.OpenAI))
    with pytest.raises(TypeError, match=r"instructor\.from_openai\(journaled\(client\)\)"):
        compat.journaled(patched)
    assert stub.calls == []
