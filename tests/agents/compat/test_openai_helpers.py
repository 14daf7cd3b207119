"""The SDK's parse and stream helpers inside a run: each shares its `create`'s journal entry, and
a reply the SDK's parser rejects replays as the same error."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pydantic
import pytest
from openai.resources.responses import AsyncResponses

from pyrula.agents import AgentContext, ReplayInputChanged, UnjournaledSurface, agent
from pyrula.runtime import resume
from tests.agents.compat.support import (
    CHAT,
    RESP,
    openai_dropin,
    openai_sync_dropin,
    park_and_resume,
)
from tests.fakes.openai_api import chat_completion, upstream
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply
from tests.runtime.support import drive, new_store, run_to_rest


class Answer(pydantic.BaseModel):
    answer: str


# `Answer`'s strict schema written out by hand, the way a caller of `create` would send it.
_SCHEMA = {
    "type": "object",
    "title": "Answer",
    "properties": {"answer": {"title": "Answer", "type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
CHAT_FORMAT = {"type": "json_schema", "json_schema": {"name": "Answer", "strict": True, "schema": _SCHEMA}}  # fmt: skip  # noqa: E501
TEXT = {"format": {"type": "json_schema", "name": "Answer", "strict": True, "schema": _SCHEMA}}


def _llm_done(handle: Any) -> list[dict[str, Any]]:
    return [e.payload for e in handle.events() if e.type == "llm:done"]


# -- each helper and its `create` form, reduced to what the caller reads ----------------------

Form = Callable[[Any], Awaitable[Any]]


async def chat_parse(client: Any) -> Any:
    reply = await client.chat.completions.parse(**CHAT, response_format=Answer)
    return reply.choices[0].message.parsed.answer


async def chat_create(client: Any) -> Any:
    reply = await client.chat.completions.create(**CHAT, response_format=CHAT_FORMAT)
    return json.loads(reply.choices[0].message.content)["answer"]


async def responses_parse(client: Any) -> Any:
    reply = await client.responses.parse(**RESP, text_format=Answer)
    return reply.output_parsed.answer


async def responses_create(client: Any) -> Any:
    reply = await client.responses.create(**RESP, text=TEXT)
    return json.loads(reply.output_text)["answer"]


async def chat_stream(client: Any) -> Any:
    async with client.chat.completions.stream(**CHAT) as stream:
        final = await stream.get_final_completion()
    return final.choices[0].message.content


async def chat_create_stream(client: Any) -> Any:
    stream = await client.chat.completions.create(**CHAT, stream=True)
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


async def responses_stream(client: Any) -> Any:
    async with client.responses.stream(**RESP) as stream:
        final = await stream.get_final_response()
    return final.output_text


async def responses_create_stream(client: Any) -> Any:
    stream = await client.responses.create(**RESP, stream=True)
    return "".join([e.delta async for e in stream if e.type == "response.output_text.delta"])


PAIRS: list[tuple[Form, Form]] = [
    (chat_parse, chat_create),
    (responses_parse, responses_create),
    (chat_stream, chat_create_stream),
    (responses_stream, responses_create_stream),
]
BOTH_WAYS = PAIRS + [(second, first) for first, second in PAIRS]


@pytest.mark.parametrize(
    ("recorded", "resumed"),
    BOTH_WAYS,
    ids=[f"{a.__name__}-then-{b.__name__}" for a, b in BOTH_WAYS],
)
def test_a_helper_and_its_create_replay_each_other(recorded, resumed):
    stub = upstream()
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        form = recorded if not seen else resumed  # the resumed attempt switches form
        seen.append(await form(openai_dropin(stub)))

    handle = park_and_resume(body, f"compat_helper_{recorded.__name__}_{resumed.__name__}")
    assert len(stub.seen) == 1  # the resumed attempt sent nothing
    assert seen[0] == seen[1] and seen[0]
    assert [d["position"] for d in _llm_done(handle)] == ["main/llm0"]


def test_a_sync_helper_and_its_create_replay_each_other():
    stub = upstream()
    seen: list[Any] = []

    def call(client: Any) -> Any:
        if not seen:
            return client.chat.completions.parse(**CHAT, response_format=Answer)
        return client.chat.completions.create(**CHAT, response_format=CHAT_FORMAT)

    async def body(ctx: AgentContext) -> None:
        client = openai_sync_dropin(stub)
        reply = await ctx.to_thread(call, client)
        seen.append(reply.choices[0].message.content)

    park_and_resume(body, "compat_helper_sync")
    assert len(stub.seen) == 1 and seen[0] == seen[1]


class Renamed(pydantic.BaseModel):
    reply: str


@pytest.mark.parametrize("surface", ["chat", "responses"])
def test_a_changed_format_class_refuses_the_resume(surface):
    stub = upstream()
    formats = [Answer, Renamed]
    caught: list[BaseException] = []

    async def body(ctx: AgentContext) -> None:
        model = formats.pop(0)
        client = openai_dropin(stub)
        try:
            if surface == "chat":
                await client.chat.completions.parse(**CHAT, response_format=model)
            else:
                await client.responses.parse(**RESP, text_format=model)
        except ReplayInputChanged as exc:
            caught.append(exc)

    park_and_resume(body, f"compat_helper_changed_{surface}")
    assert len(stub.seen) == 1 and len(caught) == 1
    assert any("reply" in d for d in caught[0].differences)


# -- a reply the parser rejects: a successful call, the same error on replay -----------------

validated: list[str] = []
built: list[int] = []


class Picky(pydantic.BaseModel):
    answer: str
    note: list[int] = pydantic.Field(default_factory=lambda: built.append(1) or [])

    @pydantic.field_validator("answer")
    @classmethod
    def not_pong(cls, value: str) -> str:
        validated.append(value)
        if value == "Pong.":
            raise ValueError("Pong. is not an answer")
        return value


async def _parse_picky(client: Any, surface: str) -> Any:
    if surface == "chat":
        return await client.chat.completions.parse(**CHAT, response_format=Picky)
    return await client.responses.parse(**RESP, text_format=Picky)


@pytest.mark.parametrize("surface", ["chat", "responses"])
def test_a_reply_the_validator_rejects_replays_as_the_same_error(surface):
    stub = upstream()
    validated.clear()
    raised: list[tuple[type, str, int]] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await _parse_picky(openai_dropin(stub), surface)
        except pydantic.ValidationError as exc:
            raised.append((type(exc), exc.errors()[0]["msg"], len(stub.seen)))

    handle = park_and_resume(body, f"compat_helper_rejected_{surface}")
    assert len(stub.seen) == 1
    assert raised[0] == raised[1] and "Pong. is not an answer" in raised[0][1]
    assert validated == ["Pong.", "Pong."]  # the caller's validator ran again on replay
    [done] = _llm_done(handle)
    assert done["status"] == 200 and "error" not in done  # journaled as a successful call


def test_default_factories_run_again_on_replay():
    class Lenient(Picky):
        @pydantic.field_validator("answer")
        @classmethod
        def not_pong(cls, value: str) -> str:
            return value

    stub = upstream()
    built.clear()
    got: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        reply = await openai_dropin(stub).chat.completions.parse(**CHAT, response_format=Lenient)
        got.append(reply.choices[0].message.parsed)

    park_and_resume(body, "compat_helper_default_factory")
    assert len(stub.seen) == 1 and got[0] == got[1] and len(built) == 2


def test_a_length_cut_reply_replays_as_length_finish_reason_error():
    def reply(request: Any) -> Any:
        body = chat_completion('{"answer": "Po')
        body["choices"][0]["finish_reason"] = "length"
        return json_reply(body)

    stub = Upstream(OPENAI_LIB, reply)
    raised: list[type] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await openai_dropin(stub).chat.completions.parse(**CHAT, response_format=Answer)
        except openai.LengthFinishReasonError as exc:
            raised.append(type(exc))

    park_and_resume(body, "compat_helper_length")
    assert len(stub.calls) == 1 and raised == [openai.LengthFinishReasonError] * 2


def test_an_uncaught_rejection_fails_the_run_and_a_resume_fails_it_the_same_way():
    stub = upstream()
    validated.clear()

    @agent(name="compat_helper_uncaught")
    async def body(ctx: AgentContext) -> None:
        await _parse_picky(openai_dropin(stub), "chat")

    store = new_store()
    handle = run_to_rest(body, store=store)
    assert handle.record.status == "failed"
    first = handle.events()[-1].payload["error"]
    resume(handle.id, store=store)
    drive(store)
    assert handle.record.status == "failed" and handle.events()[-1].payload["error"] == first
    assert first["type"] == "ValidationError" and len(stub.seen) == 1
    assert validated == ["Pong.", "Pong."]


# -- a helper whose SDK internals moved: refused in a run, the SDK's own outside one -----------

# Each fakes an openai release that moved what the drop-in needs: the stream helpers' manager
# (which holds the request until it is entered), or the parse helpers' `post_parser`.
MOVED = {
    "chat_stream": ("openai.lib.streaming.chat", "AsyncChatCompletionStreamManager", chat_stream),
    "responses_stream": (
        "openai.lib.streaming.responses",
        "AsyncResponseStreamManager",
        responses_stream,
    ),
    "chat_parse": ("openai._base_client", "make_request_options", chat_parse),
    "responses_parse": ("openai._base_client", "make_request_options", responses_parse),
}


class _TakesNoParameter:
    """What a release might put in the place of a manager or a function: it no longer takes
    the parameter the drop-in needs."""

    def __init__(self, request: Any) -> None:
        self.request = request


@pytest.mark.parametrize("how", ["gone", "changed"])
@pytest.mark.parametrize("case", sorted(MOVED))
def test_a_helper_whose_internals_moved_is_refused_in_a_run_naming_the_release(
    case, how, monkeypatch
):
    module, name, form = MOVED[case]
    # The SDK's helper keeps the reference it imported, so outside a run it still works.
    if how == "gone":
        monkeypatch.delattr(importlib.import_module(module), name)
    else:
        monkeypatch.setattr(importlib.import_module(module), name, _TakesNoParameter)
    stub = upstream()
    caught: list[UnjournaledSurface] = []

    @agent(name=f"compat_helper_moved_{case}_{how}")
    async def body(ctx: AgentContext) -> None:
        try:
            await form(openai_dropin(stub))
        except UnjournaledSurface as exc:
            caught.append(exc)

    handle = run_to_rest(body)
    assert handle.record.status == "completed" and stub.seen == []  # nothing was sent
    [exc] = caught
    assert f"openai {openai.__version__}" in str(exc) and f"`{module}.{name}`" in str(exc)
    assert ".create(...)` instead" in str(exc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert asyncio.run(form(openai_dropin(stub)))  # outside a run: the SDK's own helper
    assert len(stub.seen) == 1


# -- responses.parse(parse_as=...) on openai 3.42 and later -----------------------------------

_PARSE_AS = "parse_as" in inspect.signature(AsyncResponses.parse).parameters
needs_parse_as = pytest.mark.skipif(not _PARSE_AS, reason="openai before 3.42 has no parse_as")


@needs_parse_as
def test_parse_as_parses_with_the_class_named_live_on_replay_and_outside_a_run():
    stub = upstream()
    seen: list[Any] = []

    async def parsed(client: Any) -> Any:
        reply = await client.responses.parse(**RESP, parse_as=Answer)
        return type(reply.output_parsed), reply.output_parsed.answer

    async def body(ctx: AgentContext) -> None:
        seen.append(await parsed(openai_dropin(stub)))

    park_and_resume(body, "compat_parse_as")
    assert seen == [(Answer, "Pong."), (Answer, "Pong.")] and len(stub.seen) == 1
    assert "text" not in stub.calls[0]  # parse_as parses; it sets no request schema
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert asyncio.run(parsed(openai_dropin(stub))) == (Answer, "Pong.")


@needs_parse_as
def test_a_configuration_update_without_parse_as_raises_the_sdks_type_error_unsent():
    stub = upstream()
    update = {"type": "configuration_update", "text": {"format": {**TEXT["format"], "name": "B"}}}
    ask = {**RESP, "input": [{"role": "user", "content": "Ping?"}, update]}
    raised: list[str] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await openai_dropin(stub).responses.parse(**ask, text_format=Answer)
        except TypeError as exc:
            raised.append(str(exc))

    handle = park_and_resume(body, "compat_parse_as_missing")
    assert stub.seen == [] and _llm_done(handle) == []  # nothing sent, nothing journaled
    assert len(raised) == 2 and "parse_as" in raised[0]
