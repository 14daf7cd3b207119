"""The OpenAI drop-in's failures: one journal position per SDK call, its final outcome kept there.

Each test runs a real openai client over a MockTransport of its own stack, parks the run after
the calls, answers it, and checks what the resumed attempt replayed and what it sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from pyrula.agents import AgentContext, agent
from pyrula.agents.compat.openai import AsyncOpenAI, OpenAI
from pyrula.runtime import answer
from tests.fakes.openai_api import chat_completion
from tests.fakes.openai_api import upstream as stub_upstream
from tests.fakes.provider import OPENAI_LIB, TEST_KEY, Upstream, json_reply
from tests.runtime.support import drive, new_store, run_to_rest

_CHAT = {"model": "gpt-6-luna", "messages": [{"role": "user", "content": "Ping?"}]}
_FAST = {"retry-after-ms": "1"}  # the SDK's backoff honours it: retries stay quick live

Reply = tuple[int, dict[str, str], list[bytes]]


def scripted(*replies: Reply | BaseException) -> Upstream:
    """A provider answering with `replies` in turn, then with a plain completion."""
    queue = list(replies)

    def reply(request: Any) -> Reply:
        if not queue:
            return json_reply(chat_completion("fallback"))
        item = queue.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    return Upstream(OPENAI_LIB, reply)


def error_reply(status: int, error: dict[str, Any], **headers: str) -> Reply:
    base = {"content-type": "application/json", "x-request-id": "req_123", **headers}
    return status, base, [json.dumps({"error": error}).encode()]


_RATE = {"message": "Slow down.", "type": "requests", "param": None, "code": "rate_limit_exceeded"}


class Sleeps:
    """Counts the SDK's backoff sleeps on the clients a test builds."""

    def __init__(self) -> None:
        self.count = 0

    def watch(self, client: Any) -> Any:
        original = client._sleep_for_retry

        async def counted(**kw: Any) -> None:
            self.count += 1
            await original(**kw)

        client._sleep_for_retry = counted
        return client


def client_for(stub: Upstream, sleeps: Sleeps, max_retries: int) -> AsyncOpenAI:
    client = AsyncOpenAI(
        api_key=TEST_KEY,
        base_url="http://openai.test/v1",
        http_client=OPENAI_LIB.AsyncClient(transport=stub.transport()),
        max_retries=max_retries,
    )
    return sleeps.watch(client)


def outcomes(handle: Any) -> list[tuple[str, int]]:
    return [
        (e.payload["position"], e.payload["status"])
        for e in handle.events()
        if e.type == "llm:done"
    ]


def run_case(stub: Upstream, call: Callable[[AsyncOpenAI], Any], max_retries: int, name: str):
    sleeps = Sleeps()
    seen: list[int] = []
    results: list[Any] = []

    @agent(name=name)
    async def parked(ctx: AgentContext) -> Any:
        client = client_for(stub, sleeps, max_retries)
        before = len(stub.calls)
        slept = sleeps.count
        try:
            results.append(("ok", await call(client)))
        except openai.APIError as exc:
            results.append(("error", exc))
        seen.append((len(stub.calls) - before, sleeps.count - slept))
        await ctx.interrupt("go on?")
        return "done"

    store = new_store()
    handle = run_to_rest(parked, store=store)
    assert handle.record.status == "parked", handle.events()[-1].payload
    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "completed", handle.events()[-1].payload
    return handle, seen, results


async def chat(client: AsyncOpenAI, **kw: Any) -> str:
    reply = await client.chat.completions.create(**{**_CHAT, **kw})
    return reply.choices[0].message.content or ""


def test_a_retried_call_is_one_position_holding_its_final_reply():
    stub = scripted(error_reply(500, {"message": "oops", "type": "server_error"}, **_FAST))
    handle, seen, results = run_case(stub, chat, 2, "err_retry_then_ok")
    assert seen == [(2, 1), (0, 0)]  # live: 500, sleep, 200; resumed: nothing sent, no sleep
    assert results == [("ok", "fallback"), ("ok", "fallback")]
    assert outcomes(handle) == [("main/llm0", 200)]


def _same_error(live: Any, replayed: Any) -> None:
    assert type(replayed) is type(live)
    for name in ("status_code", "code", "type", "param", "body", "request_id"):
        assert getattr(replayed, name) == getattr(live, name), name


@pytest.mark.parametrize("max_retries", [0, 1])
def test_a_rate_limit_replays_as_the_sdk_error_with_nothing_sent(max_retries):
    replies = [
        error_reply(429, _RATE, **_FAST, **{"retry-after": "0", "x-ratelimit-limit": "9"})
    ] * (max_retries + 1)
    stub = scripted(*replies)
    handle, seen, results = run_case(stub, chat, max_retries, f"err_429_{max_retries}")
    assert seen == [(max_retries + 1, max_retries), (0, 0)]
    (kind, live), (kind2, replayed) = results
    assert kind == kind2 == "error" and isinstance(live, openai.RateLimitError)
    _same_error(live, replayed)
    assert replayed.request_id == "req_123" and replayed.code == "rate_limit_exceeded"
    assert dict(replayed.response.headers) == {
        "retry-after": "0",
        "retry-after-ms": "1",
        "x-request-id": "req_123",
        "content-length": replayed.response.headers["content-length"],
    }
    assert type(replayed.response) is OPENAI_LIB.Response
    assert replayed.response.json() == {"error": _RATE}
    assert "?" not in str(replayed.request.url)
    assert outcomes(handle) == [("main/llm0", 429)]


def test_a_body_that_catches_the_error_takes_the_same_branch_on_replay():
    stub = scripted(error_reply(429, _RATE))

    async def with_fallback(client: AsyncOpenAI) -> str:
        try:
            return await chat(client)
        except openai.RateLimitError:
            return "fell back: " + await chat(client, model="gpt-small")

    handle, seen, results = run_case(stub, with_fallback, 0, "err_fallback")
    assert seen == [(2, 0), (0, 0)]
    assert results == [("ok", "fell back: fallback")] * 2
    assert outcomes(handle) == [("main/llm0", 429), ("main/llm1", 200)]


def test_not_found():
    stub = scripted(error_reply(404, {"message": "no such model", "type": "invalid_request_error",
                                      "param": "model", "code": "model_not_found"}))  # fmt: skip
    _handle, seen, results = run_case(stub, chat, 2, "err_404")
    assert seen == [(1, 0), (0, 0)]  # a 404 is not retried
    (_, live), (_, replayed) = results
    assert isinstance(replayed, openai.NotFoundError)
    _same_error(live, replayed)
    assert replayed.param == "model"


def test_an_error_body_over_16_kib_is_not_kept():
    big = {"message": "x" * (17 * 1024), "type": "invalid_request_error", "code": "too_big"}
    stub = scripted(error_reply(400, big))
    _handle, seen, results = run_case(stub, chat, 0, "err_big")
    (_, live), (_, replayed) = results
    assert live.body is not None and live.code == "too_big"
    assert isinstance(replayed, openai.BadRequestError)
    assert replayed.body is None and replayed.code is None and replayed.response.content == b""
    assert replayed.status_code == 400 and replayed.request_id == "req_123"
    assert seen[1] == (0, 0)


def test_a_secret_echoed_in_the_error_body_is_scrubbed_on_replay():
    leak = {"message": f"Incorrect API key provided: {TEST_KEY}.", "type": "invalid_request_error",
            "code": "invalid_api_key"}  # fmt: skip
    stub = scripted(error_reply(401, leak))
    _handle, seen, results = run_case(stub, chat, 0, "err_secret")
    (_, live), (_, replayed) = results
    assert TEST_KEY in str(live)  # the live raise is the SDK's own, untouched
    assert isinstance(replayed, openai.AuthenticationError)
    assert TEST_KEY not in json.dumps(replayed.body) and TEST_KEY not in str(replayed)
    assert "[scrubbed]" in replayed.body["message"]
    assert replayed.code == "invalid_api_key" and seen[1] == (0, 0)


def test_a_dropped_connection_replays_as_a_connection_error():
    def dropped() -> BaseException:
        return OPENAI_LIB.ReadError("connection reset by peer")

    stub = scripted(dropped(), dropped())
    handle, seen, results = run_case(stub, chat, 1, "err_dropped")
    assert seen == [(2, 1), (0, 0)]
    (kind, live), (kind2, replayed) = results
    assert kind == kind2 == "error"
    assert type(live) is type(replayed) is openai.APIConnectionError
    assert str(replayed) == str(live)
    assert outcomes(handle) == [("main/llm0", 0)]


def test_a_connection_never_made_is_not_journaled():
    stub = scripted(OPENAI_LIB.ConnectError("refused"))
    handle, seen, results = run_case(stub, chat, 0, "err_connect")
    assert seen == [(1, 0), (1, 0)]  # the resume runs it live again
    assert isinstance(results[0][1], openai.APIConnectionError) and results[1][0] == "ok"
    assert outcomes(handle) == [("main/llm0", 200)]


def test_a_local_failure_before_sending_is_not_journaled():
    stub = stub_upstream()
    caught: list[BaseException] = []

    async def body(client: AsyncOpenAI) -> str:
        try:
            await client.chat.completions.create(model="gpt-6-luna")  # no messages
        except TypeError as exc:
            caught.append(exc)
        return await chat(client)

    handle, seen, _results = run_case(stub, body, 0, "err_local")  # type: ignore[arg-type]
    assert len(caught) == 2 and seen == [(1, 0), (0, 0)]
    assert outcomes(handle) == [("main/llm0", 200)]


def test_a_sync_client_on_a_thread_journals_the_final_outcome():
    stub = scripted(error_reply(503, {"message": "busy", "type": "server_error"}, **_FAST))
    seen: list[int] = []

    @agent(name="err_sync_retry")
    async def parked(ctx: AgentContext) -> Any:
        client = OpenAI(
            api_key=TEST_KEY,
            base_url="http://openai.test/v1",
            http_client=OPENAI_LIB.Client(transport=stub.transport()),
            max_retries=1,
        )
        before = len(stub.calls)

        def ask() -> str:
            reply = client.chat.completions.create(**_CHAT)
            return reply.choices[0].message.content or ""

        assert await ctx.to_thread(ask) == "fallback"
        seen.append(len(stub.calls) - before)
        await ctx.interrupt("go on?")
        return "done"

    store = new_store()
    handle = run_to_rest(parked, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "completed", handle.events()[-1].payload
    assert seen == [2, 0]
    assert outcomes(handle) == [("thread:main/thread0/llm0", 200)]


@pytest.mark.parametrize("helper", ["chat.completions.stream", "responses.stream"])
def test_a_stream_helper_is_one_call_too(helper):
    from tests.fakes.openai_api import chat_sse, response_sse
    from tests.fakes.provider import sse_reply

    ok = sse_reply(chat_sse("Pong .") if helper.startswith("chat") else response_sse())
    limited = error_reply(429, _RATE, **_FAST)
    stub = scripted(error_reply(500, {"message": "oops"}, **_FAST), ok, limited, limited)

    async def streamed(client: AsyncOpenAI) -> Any:
        target: Any = client
        for name in helper.split("."):
            target = getattr(target, name)
        kwargs = _CHAT if helper.startswith("chat") else {"model": "gpt-6-luna", "input": "Hi"}
        async with target(**kwargs) as stream:
            events = [event async for event in stream]
        try:
            async with target(**kwargs) as stream:
                pass
        except openai.RateLimitError as exc:
            return len(events) > 0, exc.status_code, exc.code
        return "no error"

    handle, seen, results = run_case(stub, streamed, 1, f"err_stream_{helper}")
    assert seen == [(4, 2), (0, 0)]
    assert results == [("ok", (True, 429, "rate_limit_exceeded"))] * 2
    assert outcomes(handle) == [("main/llm0", 200), ("main/llm1", 429)]
