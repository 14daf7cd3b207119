"""The boto3 Bedrock drop-in: converse and converse_stream journaled live, replayed with nothing
sent; what the client still is; secrets kept off disk; metering.

Each test drives a real boto3 `bedrock-runtime` client (SigV4 signing with fake credentials, its
own urllib3 pool) against a stand-in Bedrock on 127.0.0.1, parks the run after its calls,
answers it, and checks what the resumed attempt replayed and what it sent.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.client import BaseClient

from pyrula.agents import AgentContext, AgentLimits, agent
from pyrula.agents.compat.bedrock import journaled_bedrock
from pyrula.errors import BudgetExceeded
from pyrula.runtime.metering import canonical_model
from tests.agents.compat.support import (
    MESSAGES,
    Case,
    converse,
    converse_stream,
    llm_done,
    store_bytes,
    without_metadata,
)
from tests.fakes import bedrock_api as bs
from tests.runtime.support import run_to_rest

SECRETS = [
    bs.ACCESS_KEY.encode(),
    bs.SECRET_KEY.encode(),
    bs.SESSION_TOKEN.encode(),
    b"AWS4-HMAC-SHA256",
    b"Signature=",
]


# -- live, then replayed with nothing sent ----------------------------------------------------


def test_converse_replays_the_live_reply_with_nothing_sent():
    with bs.BedrockStub(bs.converse_reply("Pong.")) as stub:
        case = Case(stub, "bedrock_converse_replay")
        handle = case.run(converse)
    assert case.sent == [1, 0]
    (kind, live), (kind2, replayed) = case.results
    assert kind == kind2 == "ok"
    assert without_metadata(replayed) == without_metadata(live)
    assert live["output"]["message"]["content"] == [{"text": "Pong."}]
    assert replayed["ResponseMetadata"]["RequestId"] == "req-converse-1"
    assert replayed["ResponseMetadata"]["HTTPStatusCode"] == 200
    [done] = llm_done(handle)
    assert done["position"] == "thread:main/thread0/llm0"
    assert (done["input_tokens"], done["output_tokens"]) == (11, 4)
    assert done["requested_model"] == bs.MODEL_ID
    assert done["model"] == canonical_model(bs.MODEL_ID) == "claude-haiku-4-5"


def test_converse_stream_replays_the_recorded_events_with_nothing_sent():
    with bs.BedrockStub(bs.stream_answer(bs.converse_events(["Po", "ng", "."]))) as stub:
        case = Case(stub, "bedrock_stream_replay")
        handle = case.run(converse_stream)
    assert case.sent == [1, 0]
    (_, live), (_, replayed) = case.results
    assert replayed == live
    assert live[0] == "req-stream-1"
    assert [e["contentBlockDelta"]["delta"]["text"] for e in live if "contentBlockDelta" in e] == [
        "Po",
        "ng",
        ".",
    ]
    assert "metadata" in live[-1]
    [done] = llm_done(handle)
    assert (done["input_tokens"], done["output_tokens"], done["estimated"]) == (11, 4, False)


def test_no_credential_or_signature_reaches_the_store():
    with bs.BedrockStub(bs.converse_reply(), bs.stream_answer(bs.converse_events(["a"]))) as stub:

        def both(client: Any) -> Any:
            return converse(client), converse_stream(client)

        case = Case(stub, "bedrock_no_secrets")
        case.run(both)
        signed = stub.seen[0].headers
    # SigV4 really ran: the request carried every one of them.
    assert signed["authorization"].startswith("AWS4-HMAC-SHA256 Credential=" + bs.ACCESS_KEY)
    assert signed["x-amz-security-token"] == bs.SESSION_TOKEN
    raw = store_bytes(case.store)
    assert raw, "the store holds the journal"
    signature = signed["authorization"].rsplit("Signature=", 1)[1].encode()
    for secret in [*SECRETS, signature]:
        assert secret not in raw, secret


# -- what the client still is -----------------------------------------------------------------


def test_the_client_stays_the_boto3_client_it_was():
    with bs.BedrockStub() as stub:
        client = bs.client(stub)
        same = journaled_bedrock(client)
        assert same is client and isinstance(client, BaseClient)
        assert journaled_bedrock(client) is client  # converting twice changes nothing
        assert client.meta.region_name == "us-east-1"
        assert client.exceptions.ThrottlingException is not None
        assert client.converse.__name__ == "converse"
        # Outside a run every call passes through, unjournaled.
        assert converse(client)["output"]["message"]["content"] == [{"text": "Pong."}]
        assert stub.count() == 1


def test_only_a_bedrock_runtime_client_converts():
    s3 = boto3.client(
        "s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    with pytest.raises(TypeError, match="bedrock-runtime"):
        journaled_bedrock(s3)
    with pytest.raises(TypeError, match="bedrock-runtime"):
        journaled_bedrock(object())


def test_a_method_taken_before_conversion_stays_unjournaled():
    with bs.BedrockStub() as stub:
        client = bs.client(stub)
        taken = client.converse
        journaled_bedrock(client)
        sent: list[int] = []

        @agent(name="bedrock_captured_method")
        async def body(ctx: AgentContext) -> None:
            await ctx.to_thread(lambda: taken(modelId=bs.MODEL_ID, messages=MESSAGES))
            sent.append(stub.count())

        handle = run_to_rest(body)
    assert handle.record.status == "completed"
    assert sent == [1] and llm_done(handle) == []


# -- what a resumed run checks ----------------------------------------------------------------


def test_a_resumed_run_asking_something_else_fails_with_nothing_sent():
    questions = iter(["Ping?", "Pong?"])
    with bs.BedrockStub(bs.converse_reply()) as stub:
        case = Case(stub, "bedrock_input_changed")
        messages = [{"role": "user", "content": [{"text": ""}]}]

        def ask(client: Any) -> Any:
            messages[0]["content"][0]["text"] = next(questions)
            return client.converse(modelId=bs.MODEL_ID, messages=messages)

        with pytest.raises(AssertionError, match="ReplayInputChanged"):
            case.run(ask)
    assert case.sent == [1]  # the resumed attempt raised before sending
    failed = [e for e in case.events if e.type == "run:error"]
    assert "messages[0].content[0].text changed" in failed[-1].payload["error"]["message"]


def test_a_call_over_the_runs_call_cap_is_not_sent():
    caught: list[BaseException] = []
    with bs.BedrockStub() as stub:

        @agent(name="bedrock_capped", limits=AgentLimits(max_llm_calls=1))
        async def capped(ctx: AgentContext) -> None:
            client = journaled_bedrock(bs.client(stub))
            await ctx.to_thread(converse, client)
            try:
                await ctx.to_thread(converse, client)
            except BudgetExceeded as exc:
                caught.append(exc)

        run_to_rest(capped)
        assert stub.count() == 1
    assert len(caught) == 1 and caught[0].limit == "max_llm_calls"
