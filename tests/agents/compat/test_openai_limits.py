"""The OpenAI drop-in against the run's limits: the store's size cap, a Responses stream that
ends in an error, and Azure deployments priced by the model their replies name."""

from __future__ import annotations

import json
import tempfile
from typing import Any

import openai
import pytest

from pyrula.agents import AgentContext, AgentLimits, agent
from pyrula.agents.compat.openai import AsyncAzureOpenAI
from pyrula.errors import BudgetExceeded
from pyrula.journal.store import Store
from pyrula.runtime import answer, resume
from pyrula.runtime.metering import prices
from tests.agents.compat.support import CHAT, RESP, azure_dropin, openai_dropin, park_and_resume
from tests.fakes.openai_api import chat_completion, chat_sse, response_body, response_sse
from tests.fakes.provider import OPENAI_LIB, Upstream, json_reply, sse_reply
from tests.runtime.support import drive, new_store, run_to_rest

OPENAI_MAJOR = int(openai.__version__.split(".")[0])


def _llm_done(handle: Any) -> list[dict[str, Any]]:
    return [e.payload for e in handle.events() if e.type == "llm:done"]


# -- the size cap: a reply too large to journal ends the run, metered ------------------------

_LONG = " ".join(["word"] * 400)  # some 60 kB of chat chunks, well over the cap below
_CAP = 8_000


def _capped_store() -> Store:
    return Store(tempfile.mkdtemp(prefix="pyrula-test-cap-"), max_record_bytes=_CAP)


def _long_upstream() -> Upstream:
    def reply(request: Any) -> Any:
        body = json.loads(request.content)
        if "chat" in request.url.path:
            if body.get("stream"):
                return sse_reply(chat_sse(_LONG, usage=True))
            return json_reply(chat_completion(_LONG * 5))
        return sse_reply(response_sse(_LONG))  # one delta: it is the body's size that counts

    return Upstream(OPENAI_LIB, reply)


async def _read_chat_stream(client: Any) -> None:
    stream = await client.chat.completions.create(**CHAT, stream=True)
    async for _chunk in stream:
        pass


async def _read_responses_stream(client: Any) -> None:
    stream = await client.responses.create(**RESP, stream=True)
    async for _event in stream:
        pass


async def _chat(client: Any) -> None:
    await client.with_options(max_retries=2).chat.completions.create(**CHAT)


_OVER_CAP = {"chat_stream": _read_chat_stream, "responses_stream": _read_responses_stream}


@pytest.mark.parametrize("reader", sorted(_OVER_CAP))
def test_a_stream_over_the_record_cap_ends_the_run_with_payload_too_large(reader):
    stub = _long_upstream()

    @agent(name=f"compat_over_cap_{reader}")
    async def body(ctx: AgentContext) -> None:
        await _OVER_CAP[reader](openai_dropin(stub))

    store = _capped_store()
    handle = run_to_rest(body, store=store)
    assert handle.record.status == "failed"
    error = handle.events()[-1].payload["error"]
    assert error["type"] == "PayloadTooLarge" and f"{_CAP:,} bytes" in error["message"]
    assert len(stub.calls) == 1
    # The reply was paid for: metered exactly, at no journal position.
    [done] = _llm_done(handle)
    assert done["error"] == "PayloadTooLarge" and done["position"] is None
    assert done["abandoned_at"] == "main/llm0" and done["estimated"] is False
    assert done["total_tokens"] > 0

    # Nothing was journaled, so a resumed run asks again, pays again and ends the same way.
    resume(handle.id, store=store)
    drive(store)
    assert handle.record.status == "failed"
    assert handle.events()[-1].payload["error"]["type"] == "PayloadTooLarge"
    assert len(stub.calls) == 2 and len(_llm_done(handle)) == 2
    store.close()


def test_a_reply_over_the_record_cap_is_not_retried_by_the_sdk():
    stub = _long_upstream()

    @agent(name="compat_over_cap_plain")
    async def body(ctx: AgentContext) -> None:
        await _chat(openai_dropin(stub))

    handle = run_to_rest(body, store=_capped_store())
    assert handle.events()[-1].payload["error"]["type"] == "PayloadTooLarge"
    assert len(stub.calls) == 1


# -- a Responses stream whose terminal event reports a failure -------------------------------


def _event(n: int, kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': n, **data})}\n\n".encode()  # noqa: E501


_FAILURE = {"code": "server_error", "message": "The model failed."}
_FAILED = {**response_body(), "status": "failed", "output": [], "usage": None, "error": _FAILURE}
# The documented `error` event carries its fields at the top; the SDK raises `APIError` for one
# that nests them under `error`, as the API has also been seen to send.
ENDINGS = {
    "error": (_event(2, "error", **_FAILURE, param=None), "error"),
    "error_nested": (_event(2, "error", error={**_FAILURE, "type": "server_error"}), "error"),
    "failed": (_event(2, "response.failed", response=_FAILED), "response.failed"),
}


async def _events(client: Any) -> Any:
    stream = await client.responses.create(**RESP, stream=True)
    return [event.type async for event in stream]


async def _final(client: Any) -> Any:
    async with client.responses.stream(**RESP) as stream:
        return (await stream.get_final_response()).status


@pytest.mark.parametrize("reader", [_events, _final], ids=["create", "stream_helper"])
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_responses_stream_ending_in_a_failure_is_the_calls_journaled_outcome(ending, reader):
    frame, error = ENDINGS[ending]
    stub = Upstream(OPENAI_LIB, lambda request: sse_reply([*response_sse()[:2], frame]))
    outcomes: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        try:
            outcomes.append(("read", await reader(openai_dropin(stub))))
        except (openai.APIError, RuntimeError) as exc:  # what the SDK raises for each, live
            outcomes.append(("raised", type(exc), str(exc), getattr(exc, "body", None)))

    handle = park_and_resume(body, f"compat_failed_stream_{ending}_{reader.__name__}")
    assert len(stub.calls) == 1  # the resumed attempt sent nothing
    assert outcomes[0] == outcomes[1]
    raises = ending == "error_nested" or reader is _final
    assert (outcomes[0][0] == "raised") is raises
    [done] = _llm_done(handle)
    assert done["position"] == "main/llm0" and done["status"] == 200
    assert done["error"] == error  # metered, not as a success


def test_a_failed_non_streamed_response_is_metered_as_failed():
    failed = {**_FAILED, "usage": response_body()["usage"]}
    stub = Upstream(OPENAI_LIB, lambda request: json_reply(failed))
    seen: list[Any] = []

    async def body(ctx: AgentContext) -> None:
        seen.append((await openai_dropin(stub).responses.create(**RESP)).status)

    handle = park_and_resume(body, "compat_failed_response")
    assert seen == ["failed", "failed"] and len(stub.calls) == 1
    [done] = _llm_done(handle)
    assert done["error"] == "response.failed" and done["total_tokens"] == 11


# -- Azure deployments: priced by the model the reply names ----------------------------------


def _azure_upstream(served_by: str) -> Upstream:
    def reply(request: Any) -> Any:
        if request.url.path.endswith("/responses"):
            return json_reply({**response_body(), "model": served_by})
        return json_reply(chat_completion("Pong.", model=served_by))

    return Upstream(OPENAI_LIB, reply)


def _azure(stub: Upstream, **kw: Any) -> AsyncAzureOpenAI:
    client: AsyncAzureOpenAI = azure_dropin(stub, **kw)
    return client


def _ask(deployment: str, **kw: Any) -> dict[str, Any]:
    return {"model": deployment, "messages": [{"role": "user", "content": "Ping?"}], **kw}


def _gpt_4o_cost(done: dict[str, Any]) -> float:
    row = prices.row("gpt-4o")
    assert row is not None
    return (done["input_tokens"] * row["input"] + done["output_tokens"] * row["output"]) / 1e6


def _limited(name: str, body: Any, max_cost_usd: float = 1.0) -> Any:
    return agent(name=name, limits=AgentLimits(max_cost_usd=max_cost_usd))(body)


def test_an_azure_deployments_first_call_goes_out_and_its_reply_model_prices_it():
    stub = _azure_upstream("gpt-4o-2024-08-06")
    refused: list[BudgetExceeded] = []

    async def body(ctx: AgentContext) -> None:
        client = _azure(stub)
        await client.chat.completions.create(**_ask("team-prod"))  # no price yet: not refused
        await client.responses.create(model="team-prod", input="Ping?")  # priced as gpt-4o
        try:  # its worst case, priced as gpt-4o ($10 per million out), is over the cap
            await client.chat.completions.create(**_ask("team-prod", max_tokens=200_000))
        except BudgetExceeded as exc:
            refused.append(exc)

    handle = run_to_rest(_limited("compat_azure_priced", body))
    assert handle.record.status == "completed" and len(stub.calls) == 2
    chat, responses = _llm_done(handle)
    assert chat["requested_model"] == responses["requested_model"] == "team-prod"
    assert chat["model"] == responses["model"] == "gpt-4o-2024-08-06"
    assert chat["cost_usd"] == pytest.approx(_gpt_4o_cost(chat)) and chat["cost_usd"] > 0
    assert responses["cost_usd"] == pytest.approx(_gpt_4o_cost(responses))
    [exc] = refused
    assert exc.limit == "max_cost_usd" and exc.code != "unpriced_model"


def test_the_deployment_named_in_the_url_is_the_requested_model():
    stub = _azure_upstream("gpt-4o-2024-08-06")

    async def body(ctx: AgentContext) -> None:
        # `azure_deployment=` routes every chat call to that deployment, whatever `model` says.
        await _azure(stub, azure_deployment="team-fixed").chat.completions.create(**_ask("gpt-5"))

    handle = run_to_rest(_limited("compat_azure_url_deployment", body))
    [done] = _llm_done(handle)
    assert done["requested_model"] == "team-fixed" and done["model"] == "gpt-4o-2024-08-06"
    assert done["cost_usd"] == pytest.approx(_gpt_4o_cost(done))


def test_a_deployment_with_its_own_price_row_is_priced_by_it(monkeypatch):
    monkeypatch.setattr(prices, "_rows", dict(prices._rows))  # undone after the test
    prices.add("team-premium", input=100.0, output=200.0)
    stub = _azure_upstream("gpt-4o-2024-08-06")

    async def body(ctx: AgentContext) -> None:
        await _azure(stub).chat.completions.create(**_ask("team-premium"))

    handle = run_to_rest(_limited("compat_azure_own_row", body))
    [done] = _llm_done(handle)
    assert done["cost_usd"] == pytest.approx((9 * 100.0 + 2 * 200.0) / 1e6)


def test_a_reply_model_with_no_price_stops_the_next_costed_call_also_after_a_resume():
    stub = _azure_upstream("mystery-model-1")

    @agent(name="compat_azure_unpriced", limits=AgentLimits(max_cost_usd=1.0))
    async def body(ctx: AgentContext) -> None:
        client = _azure(stub)
        await client.chat.completions.create(**_ask("team-odd"))
        await ctx.interrupt("go on?")  # the resumed attempt learns the model from the journal
        await client.chat.completions.create(**_ask("team-odd", messages=[]))

    store = new_store()
    handle = run_to_rest(body, store=store)
    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "budget_exceeded" and len(stub.calls) == 1
    error = handle.events()[-1].payload["error"]
    assert error["code"] == "unpriced_model" and "mystery-model-1" in error["message"]
    [done] = _llm_done(handle)
    assert done["requested_model"] == "team-odd" and done["cost_usd"] is None


def test_an_unpriced_plain_model_is_still_refused_before_its_first_call():
    stub = _azure_upstream("mystery-model-1")
    refused: list[BudgetExceeded] = []

    async def body(ctx: AgentContext) -> None:
        try:
            await openai_dropin(stub).chat.completions.create(**{**CHAT, "model": "mystery-1"})
        except BudgetExceeded as exc:
            refused.append(exc)

    run_to_rest(_limited("compat_plain_unpriced", body))
    assert stub.calls == [] and refused[0].code == "unpriced_model"


_PROFILE = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6"


@pytest.mark.skipif(not hasattr(openai, "BedrockOpenAI"), reason="openai without BedrockOpenAI")
def test_a_bedrock_application_inference_profile_is_opaque_like_a_deployment():
    from pyrula.agents.compat.openai import AsyncBedrockOpenAI  # type: ignore[attr-defined]

    stub = _azure_upstream("openai.gpt-oss-120b-1:0")

    async def body(ctx: AgentContext) -> None:
        client = AsyncBedrockOpenAI(
            api_key="bedrock-api-key",
            aws_region="us-east-1",
            http_client=OPENAI_LIB.AsyncClient(transport=stub.transport()),
            max_retries=0,
        )
        await client.chat.completions.create(**_ask(_PROFILE))
        await client.chat.completions.create(**_ask(_PROFILE, messages=[]))

    handle = run_to_rest(_limited("compat_bedrock_profile", body))
    assert handle.record.status == "completed" and len(stub.calls) == 2
    row = prices.row("gpt-oss-120b")  # the reply's Bedrock model id, canonicalised
    assert row is not None
    for done in _llm_done(handle):
        assert done["requested_model"] == _PROFILE and done["model"] == "openai.gpt-oss-120b-1:0"
        assert done["cost_usd"] == pytest.approx((9 * row["input"] + 2 * row["output"]) / 1e6)
