"""The boto3 Bedrock drop-in's failures: what is journaled once and replayed as the same botocore
exception with nothing sent, and what happens before a request leaves and so is not journaled."""

from __future__ import annotations

import types
from typing import Any

import boto3
import botocore.endpoint
import botocore.exceptions
import pytest
from botocore.config import Config

from pyrula.errors import ProviderStreamTruncated
from tests.agents.compat.support import (
    MESSAGES,
    Case,
    converse,
    converse_stream,
    llm_done,
    store_bytes,
)
from tests.fakes import bedrock_api as bs


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore sleeps between retries through `botocore.endpoint.time`: make that instant."""
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda s: None))


def events_until_error(client: Any) -> tuple[list[Any], BaseException | None]:
    reply = client.converse_stream(modelId=bs.MODEL_ID, messages=MESSAGES)
    seen: list[Any] = []
    try:
        for event in reply["stream"]:
            seen.append(event)
    except Exception as exc:
        return seen, exc
    return seen, None


# -- service errors: journaled once, replayed as the modelled ClientError --------------------


def test_a_throttle_replays_as_the_same_client_error_with_nothing_sent():
    with bs.BedrockStub(bs.error_answer(429, "ThrottlingException", "Too many requests.")) as stub:
        case = Case(stub, "bedrock_err_throttle")
        handle = case.run(converse)
        client = bs.client(stub)
    assert case.sent == [1, 0]
    (kind, live), (kind2, replayed) = case.results
    assert kind == kind2 == "error"
    assert isinstance(live, client.exceptions.ThrottlingException)
    assert isinstance(replayed, client.exceptions.ThrottlingException)
    assert str(replayed) == str(live)
    assert (
        replayed.response["Error"]
        == live.response["Error"]
        == {
            "Code": "ThrottlingException",
            "Message": "Too many requests.",
        }
    )
    for name in ("RequestId", "HTTPStatusCode", "RetryAttempts"):
        assert (
            replayed.response["ResponseMetadata"][name] == live.response["ResponseMetadata"][name]
        )
    assert replayed.response["ResponseMetadata"]["RequestId"] == "req-err-1"
    assert replayed.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert replayed.response["ResponseMetadata"]["HTTPHeaders"] == {}  # headers are not kept
    assert replayed.operation_name == "Converse"
    assert [d["position"] for d in llm_done(handle)] == ["thread:main/thread0/llm0"]


def test_a_retried_call_is_one_position_holding_its_final_reply(no_backoff):
    with bs.BedrockStub(bs.error_answer(500, "InternalServerException", "oops")) as stub:
        case = Case(stub, "bedrock_err_retry_ok", attempts=2)
        handle = case.run(converse)
    assert case.sent == [2, 0]  # live: 500, then 200; resumed: nothing
    assert [kind for kind, _ in case.results] == ["ok", "ok"]
    [done] = llm_done(handle)
    assert (done["position"], done["status"]) == ("thread:main/thread0/llm0", 200)


def test_the_error_botocore_gave_up_on_is_the_one_journaled(no_backoff):
    unavailable = [bs.error_answer(503, "ServiceUnavailableException", "busy")] * 2
    with bs.BedrockStub(*unavailable) as stub:
        case = Case(stub, "bedrock_err_retry_exhausted", attempts=2)
        case.run(converse)
        client = bs.client(stub)
    assert case.sent == [2, 0]
    (_, live), (_, replayed) = case.results
    assert isinstance(replayed, client.exceptions.ServiceUnavailableException)
    assert str(replayed) == str(live)
    assert "reached max retries: 1" in str(replayed)


def test_an_error_event_in_a_stream_replays_with_nothing_sent():
    frames = [*bs.converse_events(["Po"])[:2], bs.exception_event("throttlingException", "slow")]
    with bs.BedrockStub(bs.stream_answer(frames)) as stub:
        case = Case(stub, "bedrock_err_in_stream")
        handle = case.run(events_until_error)
    assert case.sent == [1, 0]
    (_, (live_events, live)), (_, (events, replayed)) = case.results
    assert events == live_events and len(events) == 2
    assert isinstance(live, botocore.exceptions.EventStreamError)
    assert type(replayed) is type(live)
    assert replayed.response == live.response
    assert live.response["Error"] == {"Code": "throttlingException", "Message": "slow"}
    assert len(llm_done(handle)) == 1


def test_a_secret_echoed_in_an_error_message_is_not_stored():
    echo = bs.error_answer(403, "AccessDeniedException", "denied for {authorization}")
    with bs.BedrockStub(echo) as stub:
        case = Case(stub, "bedrock_err_echo")
        case.run(converse)
        signature = stub.seen[0].headers["authorization"].rsplit("Signature=", 1)[1]
    (_, live), (_, replayed) = case.results
    assert bs.ACCESS_KEY in str(live)  # the provider did echo it
    assert bs.ACCESS_KEY not in str(replayed) and signature not in str(replayed)
    raw = store_bytes(case.store)
    assert bs.ACCESS_KEY.encode() not in raw and signature.encode() not in raw


# -- transport failures after the request left: journaled, replayed as the same class --------


def test_a_read_timeout_replays_as_read_timeout_with_nothing_sent():
    with bs.BedrockStub(bs.Answer(hang_first=True)) as stub:
        case = Case(stub, "bedrock_err_read_timeout", read_timeout=0.2)
        case.run(converse)
    assert case.sent == [1, 0]
    (_, live), (_, replayed) = case.results
    assert isinstance(live, botocore.exceptions.ReadTimeoutError)
    assert type(replayed) is type(live)
    assert str(replayed) == str(live)


@pytest.mark.parametrize("then", ["reset", "end"], ids=["connection-reset", "ended-early"])
def test_a_stream_cut_short_replays_the_same_events_then_the_same_error(then):
    frames = bs.converse_events(["Po", "ng"], metadata=False)[:3]
    with bs.BedrockStub(bs.stream_answer(frames, then=then)) as stub:
        case = Case(stub, f"bedrock_err_cut_{then}")
        handle = case.run(events_until_error)
    assert case.sent == [1, 0]
    (_, (live_events, live)), (_, (events, replayed)) = case.results
    assert events == live_events and len(events) == 3
    assert isinstance(live, botocore.exceptions.ResponseStreamingError)
    assert isinstance(replayed, botocore.exceptions.ResponseStreamingError)
    assert isinstance(replayed.__cause__, ProviderStreamTruncated)
    [done] = llm_done(handle)
    assert done["estimated"] is True and done["error"] == "ProviderStreamTruncated"


# -- failures before the request leaves: not journaled, so a resume runs the call live -------


def test_a_rejected_argument_is_not_journaled():
    with bs.BedrockStub() as stub:
        case = Case(stub, "bedrock_err_param")
        handle = case.run(lambda c: c.converse(modelId=bs.MODEL_ID, messages="not a list"))
    assert case.sent == [0, 0]
    assert all(isinstance(exc, botocore.exceptions.ParamValidationError) for _, exc in case.results)
    assert llm_done(handle) == []


def test_a_connection_never_made_is_not_journaled():
    with bs.BedrockStub() as closed:
        pass  # nothing listens on its port any more
    case = Case(closed, "bedrock_err_connect")
    handle = case.run(converse)
    assert [type(exc) for _, exc in case.results] == [
        botocore.exceptions.EndpointConnectionError
    ] * 2
    assert llm_done(handle) == []


def test_missing_credentials_are_not_journaled(monkeypatch: pytest.MonkeyPatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    from pyrula.agents import AgentContext, agent
    from pyrula.agents.compat.bedrock import journaled_bedrock
    from pyrula.runtime import answer
    from tests.runtime.support import drive, new_store, run_to_rest

    errors: list[BaseException] = []
    with bs.BedrockStub() as stub:

        @agent(name="bedrock_err_no_credentials")
        async def body(ctx: AgentContext) -> None:
            client = journaled_bedrock(
                boto3.client(
                    "bedrock-runtime",
                    region_name="us-east-1",
                    endpoint_url=stub.url,
                    config=Config(retries={"total_max_attempts": 1}),
                )
            )
            try:
                await ctx.to_thread(converse, client)
            except botocore.exceptions.NoCredentialsError as exc:
                errors.append(exc)
            await ctx.interrupt("go on?")

        store = new_store()
        handle = run_to_rest(body, store=store)
        answer(handle.id, "yes", store=store)
        drive(store)
        assert stub.count() == 0
    assert handle.record.status == "completed"
    assert len(errors) == 2 and llm_done(handle) == []


def test_converse_stream_http_error_replays_as_client_error():
    with bs.BedrockStub(bs.error_answer(400, "ValidationException", "bad model")) as stub:
        case = Case(stub, "bedrock_err_stream_http")
        case.run(converse_stream)
        client = bs.client(stub)
    assert case.sent == [1, 0]
    (_, live), (_, replayed) = case.results
    assert isinstance(replayed, client.exceptions.ValidationException)
    assert str(replayed) == str(live) and replayed.operation_name == "ConverseStream"
