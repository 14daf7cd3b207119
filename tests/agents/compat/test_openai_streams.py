"""The OpenAI drop-in's streams inside a run: usage asked for, truncation journaled."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from pyrula.agents import AgentContext
from tests.agents.compat.support import CHAT, openai_dropin, openai_sync_dropin, park_and_resume
from tests.fakes.openai_api import upstream


def _llm_done(handle: Any) -> list[dict[str, Any]]:
    return [e.payload for e in handle.events() if e.type == "llm:done"]


# -- usage asked for inside an @agent ---------------------------------------------------------


async def _create(client: Any, **kw: Any) -> list[Any]:
    stream = await client.chat.completions.create(**CHAT, stream=True, **kw)
    return [chunk.model_dump() async for chunk in stream]


async def _helper(client: Any, **kw: Any) -> list[Any]:
    async with client.chat.completions.stream(**CHAT, **kw) as stream:
        return [event.type async for event in stream]


@pytest.mark.parametrize("call", [_create, _helper], ids=["create", "stream"])
def test_an_agent_stream_asks_for_usage_and_meters_it(call):
    stub = upstream()
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        seen.append(await call(openai_dropin(stub)))

    handle = park_and_resume(body, f"compat_usage_{call.__name__}")
    assert len(stub.calls) == 1  # live once; the resumed attempt replayed it
    assert stub.calls[0]["stream_options"] == {"include_usage": True}
    assert seen[0] == seen[1]
    [done] = _llm_done(handle)
    assert (done["input_tokens"], done["output_tokens"], done["total_tokens"]) == (3, 4, 7)
    assert done["estimated"] is False and done["position"] == "main/llm0"


def test_a_callers_own_stream_options_are_kept():
    stub = upstream()

    async def body(ctx: AgentContext) -> None:
        await _create(openai_dropin(stub), stream_options={"include_usage": False})

    park_and_resume(body, "compat_usage_declined")
    assert stub.calls[0]["stream_options"] == {"include_usage": False}


def test_outside_a_run_nothing_is_added():
    stub = upstream()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asyncio.run(_create(openai_dropin(stub)))
    assert "stream_options" not in stub.calls[0]


# -- a stream the provider cuts short ---------------------------------------------------------


def _cut_upstream() -> Any:
    """The stub provider, with every stream ended before its terminal frame."""
    import json

    from tests.fakes.openai_api import chat_sse, response_sse
    from tests.fakes.provider import OPENAI_LIB, Upstream, sse_reply

    def reply(request: Any) -> Any:
        if "chat" in request.url.path:
            return sse_reply(chat_sse("Pong .", usage=False, done=False, finish=False))
        assert json.loads(request.content)["stream"] is True
        return sse_reply(response_sse()[:-1])  # no `response.completed`

    return Upstream(OPENAI_LIB, reply)


async def _read_chat(client: Any, got: list[str]) -> None:
    stream = await client.chat.completions.create(**CHAT, stream=True)
    got.append("sent")
    async for chunk in stream:
        got.append(chunk.choices[0].delta.content or "")


async def _read_responses(client: Any, got: list[str]) -> None:
    stream = await client.responses.create(model="gpt-6-luna", input="Ping?", stream=True)
    got.append("sent")
    async for event in stream:
        got.append(event.type)


async def _read_chat_helper(client: Any, got: list[str]) -> None:
    async with client.chat.completions.stream(**CHAT) as stream:
        got.append("sent")
        async for event in stream:
            got.append(event.type)


_READERS = {"chat": _read_chat, "responses": _read_responses, "chat_helper": _read_chat_helper}


@pytest.mark.parametrize("reader", sorted(_READERS))
def test_a_truncated_stream_raises_and_replays_the_error(reader):
    from pyrula.agents import ProviderStreamTruncated

    stub = _cut_upstream()
    outcomes: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        got: list[str] = []
        try:
            await _READERS[reader](openai_dropin(stub), got)
        except ProviderStreamTruncated as exc:
            outcomes.append(("truncated", len(stub.calls), str(exc), got))
        else:
            outcomes.append(("finished", len(stub.calls), got))

    handle = park_and_resume(body, f"compat_truncated_{reader}")
    assert len(stub.calls) == 1  # the resumed attempt sent nothing
    assert [o[:2] for o in outcomes] == [("truncated", 1), ("truncated", 1)]
    assert outcomes[0] == outcomes[1] and "main/llm0" in outcomes[0][2]
    assert outcomes[0][3][0] == "sent" and len(outcomes[0][3]) > 2  # raised while reading
    [done] = _llm_done(handle)
    assert done["position"] == "main/llm0" and done["error"] == "ProviderStreamTruncated"
    assert done["estimated"] is True


def test_a_truncated_stream_outside_a_run_ends_quietly():
    stub = _cut_upstream()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        words: list[str] = []
        asyncio.run(_read_chat(openai_dropin(stub), words))
    assert "".join(words[1:]).strip() == "Pong ."


def test_a_truncated_stream_on_a_sync_client_raises_and_replays_the_error():
    from pyrula.agents import ProviderStreamTruncated

    stub = _cut_upstream()
    outcomes: list[Any] = []

    def read(client: Any) -> None:
        got: list[str] = []
        try:
            for chunk in client.chat.completions.create(**CHAT, stream=True):
                got.append(chunk.choices[0].delta.content or "")
        except ProviderStreamTruncated:
            outcomes.append(("truncated", len(stub.calls), got))

    async def body(ctx: AgentContext) -> None:
        client = openai_sync_dropin(stub)
        await ctx.to_thread(read, client)

    park_and_resume(body, "compat_truncated_sync")
    assert len(stub.calls) == 1
    assert outcomes[0] == outcomes[1] and outcomes[0][:2] == ("truncated", 1) and outcomes[0][2]


# -- the SDK's own stream object, live and on replay ------------------------------------------


async def _async_forms(client: Any) -> list[Any]:
    got: list[Any] = []
    async with await client.chat.completions.create(**CHAT, stream=True) as stream:
        got += [chunk.model_dump() async for chunk in stream]
    stream = await client.responses.create(model="gpt-6-luna", input="Ping?", stream=True)
    got += [event.type async for event in stream]
    await stream.close()
    return got


def test_async_for_with_and_close_live_and_on_replay():
    stub = upstream()
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        seen.append(await _async_forms(openai_dropin(stub)))

    handle = park_and_resume(body, "compat_stream_forms")
    assert len(stub.calls) == 2 and seen[0] == seen[1] and seen[0]
    assert [d["position"] for d in _llm_done(handle)] == ["main/llm0", "main/llm1"]


def test_sync_for_with_and_close_live_and_on_replay():

    stub = upstream()
    seen: list[Any] = []

    def read(client: Any) -> list[Any]:
        with client.chat.completions.create(**CHAT, stream=True) as stream:
            got: list[Any] = [chunk.model_dump() for chunk in stream]
        stream = client.responses.create(model="gpt-6-luna", input="Ping?", stream=True)
        got += [event.type for event in stream]
        stream.close()
        return got

    async def body(ctx: AgentContext) -> None:
        client = openai_sync_dropin(stub)
        seen.append(await ctx.to_thread(read, client))

    park_and_resume(body, "compat_stream_forms_sync")
    assert len(stub.calls) == 2 and seen[0] == seen[1] and seen[0]


def test_a_stream_stopped_early_runs_live_again_and_is_metered_once_as_estimated():
    stub = upstream()
    attempts: list[int] = []

    async def body(ctx: AgentContext) -> None:
        attempts.append(len(attempts))
        stream = await openai_dropin(stub).chat.completions.create(**CHAT, stream=True)
        async for _chunk in stream:
            if len(attempts) == 1:
                break  # the first attempt stops after the first chunk
        await stream.close()

    handle = park_and_resume(body, "compat_stream_stopped")
    assert len(stub.calls) == 2  # not journaled: the resumed attempt sent it again
    done = _llm_done(handle)
    assert [(d["estimated"], d["position"]) for d in done] == [(True, None), (False, "main/llm0")]
    assert done[0]["abandoned_at"] == "main/llm0"


def test_breaking_out_on_the_finish_reason_chunk_leaves_the_call_journaled():
    stub = upstream()
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        got: list[Any] = []
        stream = await openai_dropin(stub).chat.completions.create(**CHAT, stream=True)
        async for chunk in stream:
            got.append(chunk.model_dump())
            if chunk.choices and chunk.choices[0].finish_reason:
                break  # before the usage chunk the drop-in asked for
        await stream.close()
        seen.append(got)

    handle = park_and_resume(body, "compat_stream_finish_break")
    assert len(stub.calls) == 1  # the resumed attempt sent no request
    assert seen[0] == seen[1] and seen[0][-1]["choices"][0]["finish_reason"] == "stop"
    [done] = _llm_done(handle)
    assert done["position"] == "main/llm0" and done["estimated"] is True


# -- n > 1: journaled once every choice has finished ------------------------------------------


def _two_choices(request: Any) -> tuple[int, dict[str, str], list[bytes]]:
    import json

    base = {"id": "chatcmpl-n", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(*choices: dict[str, Any], usage: Any = None) -> bytes:
        return (
            f"data: {json.dumps({**base, 'choices': list(choices), 'usage': usage})}\n\n".encode()
        )

    frames = [
        chunk({"index": 0, "delta": {"role": "assistant", "content": "A"}}),
        chunk({"index": 0, "delta": {}, "finish_reason": "stop"}),
        chunk({"index": 1, "delta": {"role": "assistant", "content": "B"}}),
        chunk({"index": 1, "delta": {}, "finish_reason": "stop"}),
        chunk(usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
        b"data: [DONE]\n\n",
    ]
    return 200, {"content-type": "text/event-stream"}, frames


@pytest.mark.parametrize("stop_after", [1, 2], ids=["first-choice", "every-choice"])
def test_with_n_above_one_a_stream_is_journaled_once_every_choice_finished(stop_after):
    from tests.fakes.provider import OPENAI_LIB, Upstream

    stub = Upstream(OPENAI_LIB, _two_choices)

    async def body(ctx: AgentContext) -> None:
        finished = 0
        stream = await openai_dropin(stub).chat.completions.create(**CHAT, n=2, stream=True)
        async for chunk in stream:
            finished += sum(1 for c in chunk.choices if c.finish_reason)
            if finished == stop_after:
                break  # before the usage chunk
        await stream.close()

    handle = park_and_resume(body, f"compat_stream_n_{stop_after}")
    # Stopped after one of two choices: not whole, so not journaled and the resume asked again
    # (and stopped there again); each attempt's reply is metered as an estimate.
    assert len(stub.calls) == (1 if stop_after == 2 else 2)
    positions = [d["position"] for d in _llm_done(handle)]
    assert positions == (["main/llm0"] if stop_after == 2 else [None, None])


# -- the stream object: the SDK's own, with a rebuilt response on replay ------------------------


def test_a_stream_is_the_sdks_own_and_a_replay_shows_no_live_request_id():
    import openai

    from tests.fakes.openai_api import chat_sse, response_sse
    from tests.fakes.provider import OPENAI_LIB, Upstream

    def reply(request: Any) -> Any:
        frames = chat_sse("Pong .") if "chat" in request.url.path else response_sse()
        headers = {"content-type": "text/event-stream", "x-request-id": "req_live_1"}
        return 200, headers, frames

    stub = Upstream(OPENAI_LIB, reply)
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        client = openai_dropin(stub)
        chat = await client.chat.completions.create(**CHAT, stream=True)
        responses = await client.responses.create(model="gpt-6-luna", input="Ping?", stream=True)
        for stream in (chat, responses):
            read = [item.model_dump() async for item in stream]
            response = stream.response
            seen.append(
                (
                    isinstance(stream, openai.AsyncStream),
                    response.status_code,
                    response.headers.get("content-type"),
                    response.headers.get("x-request-id"),
                    read,
                )
            )

    park_and_resume(body, "compat_stream_object")
    assert len(stub.calls) == 2  # the resumed attempt read both streams from the journal
    live, replayed = seen[:2], seen[2:]
    for first, second in zip(live, replayed, strict=True):
        assert first[:3] == second[:3] == (True, 200, "text/event-stream")
        assert first[3] == "req_live_1" and second[3] is None  # no id of a request not sent
        assert first[4] == second[4] and first[4]


def test_a_sync_stream_is_the_sdks_own_and_a_replay_shows_no_live_request_id():
    import openai

    from tests.fakes.openai_api import chat_sse
    from tests.fakes.provider import OPENAI_LIB, Upstream

    def reply(request: Any) -> Any:
        headers = {"content-type": "text/event-stream", "x-request-id": "req_live_1"}
        return 200, headers, chat_sse("Pong .")

    stub = Upstream(OPENAI_LIB, reply)
    seen: list[Any] = []

    def read(client: Any) -> Any:
        with client.chat.completions.create(**CHAT, stream=True) as stream:
            read = [chunk.model_dump() for chunk in stream]
        kind = isinstance(stream, openai.Stream)
        return kind, stream.response.headers.get("x-request-id"), read

    async def body(ctx: AgentContext) -> None:
        seen.append(await ctx.to_thread(read, openai_sync_dropin(stub)))

    park_and_resume(body, "compat_sync_stream_object")
    assert len(stub.calls) == 1
    (live_kind, live_id, live), (kind, replayed_id, replayed) = seen
    assert live_kind is kind is True and live == replayed and live
    assert live_id == "req_live_1" and replayed_id is None
