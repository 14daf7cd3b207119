"""The botocore adapter: a boto3 client inside `pyrula.cassette(...)` records once, then replays
offline (mode `none`) with the provider stopped, into objects equal to the live ones.

A real boto3 `bedrock-runtime` client (SigV4 with fake credentials, its own urllib3 pool) talks
to a stand-in Bedrock on 127.0.0.1; the replay runs after the stand-in has shut down.
"""

from __future__ import annotations

from typing import Any

import boto3
import botocore.exceptions
import pytest

import pyrula
from pyrula.agents.compat import journaled
from pyrula.journal import Exchanges, Store
from tests.fakes import bedrock_api as bs

MESSAGES = [{"role": "user", "content": [{"text": "Ping?"}]}]

# The two ways a boto3 client is journaled: the drop-in, and the plain adapter.
CONVERSIONS = {"drop-in": journaled, "adapter": pyrula.journal_botocore}


def converse(client: Any) -> dict[str, Any]:
    reply: dict[str, Any] = client.converse(modelId=bs.MODEL_ID, messages=MESSAGES)
    return reply


def converse_stream(client: Any) -> list[Any]:
    reply = client.converse_stream(modelId=bs.MODEL_ID, messages=MESSAGES)
    return [reply["ResponseMetadata"], *reply["stream"]]


def both(client: Any) -> tuple[dict[str, Any], list[Any]]:
    return converse(client), converse_stream(client)


# Transfer framing is not kept: a replay is not re-chunked (see `scrub.TRANSFER_HEADERS`).
FRAMING = {"transfer-encoding", "content-length", "connection", "keep-alive"}


def unframed(value: Any) -> Any:
    """`value` with the transfer-framing headers left out of every `ResponseMetadata`."""
    if isinstance(value, list | tuple):
        return [unframed(item) for item in value]
    if isinstance(value, dict) and "HTTPHeaders" in value:
        headers = {k: v for k, v in value["HTTPHeaders"].items() if k not in FRAMING}
        return {**value, "HTTPHeaders": headers}
    if isinstance(value, dict):
        return {k: unframed(v) for k, v in value.items()}
    return value


def recorded_then_replayed(convert: Any, store_path: Any, *answers: bs.Answer) -> Any:
    """`both` recorded against the stand-in, then replayed with the stand-in stopped."""
    with bs.BedrockStub(*answers) as stub:
        client = convert(bs.client(stub))
        with pyrula.cassette("bedrock", store=store_path):
            live = both(client)
        assert stub.count() == 2
    with pyrula.cassette("bedrock", mode="none", store=store_path):
        replayed = both(client)
    return live, replayed


@pytest.mark.parametrize("conversion", CONVERSIONS)
def test_converse_and_converse_stream_replay_offline_into_equal_objects(conversion, store_path):
    live, replayed = recorded_then_replayed(
        CONVERSIONS[conversion],
        store_path,
        bs.converse_reply("Pong."),
        bs.stream_answer(bs.converse_events(["Po", "ng", "."])),
    )
    assert unframed(replayed) == unframed(live)
    reply, events = replayed
    assert reply["output"]["message"]["content"] == [{"text": "Pong."}]
    assert reply["ResponseMetadata"]["RequestId"] == "req-converse-1"
    deltas = [e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e]
    assert deltas == ["Po", "ng", "."]
    assert events[0]["RequestId"] == "req-stream-1" and "metadata" in events[-1]
    with Store(store_path) as store:
        kept = sorted((r.surface, r.streamed) for _, r in Exchanges(store).scan())
    assert kept == [("bedrock.converse", False), ("bedrock.converse", True)]


def test_a_service_error_replays_as_the_same_client_error(store_path):
    refusal = bs.error_answer(400, "ValidationException", "The model is not available.")
    with bs.BedrockStub(refusal) as stub:
        client = journaled(bs.client(stub))
        refused = client.exceptions.ValidationException
        with pyrula.cassette("refused", store=store_path), pytest.raises(refused) as live:
            converse(client)
    with (
        pyrula.cassette("refused", mode="none", store=store_path),
        pytest.raises(refused) as replayed,
    ):
        converse(client)
    assert str(replayed.value) == str(live.value)
    assert replayed.value.response["Error"] == live.value.response["Error"]


def test_an_unrecorded_call_in_mode_none_is_a_replay_miss_with_nothing_sent(store_path):
    pyrula.Store(store_path).close()  # replay-only mode needs an existing store
    with bs.BedrockStub() as stub:
        client = pyrula.journal_botocore(bs.client(stub))
        with (
            pyrula.cassette("empty", mode="none", store=store_path),
            pytest.raises(pyrula.ReplayMiss, match=r"bedrock\.converse"),
        ):
            converse(client)
        assert stub.count() == 0


def test_outside_a_cassette_the_client_sends_as_usual_and_nothing_is_kept(store_path):
    with bs.BedrockStub() as stub:
        client = pyrula.journal_botocore(bs.client(stub))
        assert pyrula.journal_botocore(client) is client  # journaling again changes nothing
        assert converse(client)["output"]["message"]["content"] == [{"text": "Pong."}]
        assert converse(client)["output"]["message"]["content"] == [{"text": "Pong."}]
        assert stub.count() == 2
    with Store(store_path) as store:
        assert list(Exchanges(store).scan()) == []


def test_a_client_of_another_service_records_and_replays_too(store_path):
    # Not Bedrock: the generic fingerprint keys it. `ListBuckets` on the stand-in's reply.
    listing = bs.Answer(
        headers={"content-type": "application/xml", "x-amz-request-id": "req-s3-1"},
        frames=[
            b'<?xml version="1.0" encoding="UTF-8"?><ListAllMyBucketsResult>'
            b"<Buckets><Bucket><Name>pyrula</Name></Bucket></Buckets></ListAllMyBucketsResult>"
        ],
    )
    with bs.BedrockStub(listing) as stub:
        s3 = pyrula.journal_botocore(
            boto3.client(
                "s3",
                region_name="us-east-1",
                endpoint_url=stub.url,
                aws_access_key_id=bs.ACCESS_KEY,
                aws_secret_access_key=bs.SECRET_KEY,
            )
        )
        with pyrula.cassette("s3", store=store_path):
            live = s3.list_buckets()
    with pyrula.cassette("s3", mode="none", store=store_path):
        replayed = s3.list_buckets()
    assert unframed(replayed) == unframed(live)
    assert [b["Name"] for b in replayed["Buckets"]] == ["pyrula"]


def test_only_a_boto3_client_is_journaled():
    with pytest.raises(TypeError, match="boto3 client"):
        pyrula.journal_botocore(object())


def test_a_stream_cut_short_in_a_cassette_is_not_recorded(store_path):
    cut = bs.stream_answer(bs.converse_events(["Po"])[:2], then="reset")
    with bs.BedrockStub(cut) as stub:
        client = pyrula.journal_botocore(bs.client(stub))
        broken = botocore.exceptions.ResponseStreamingError
        with pyrula.cassette("cut", store=store_path), pytest.raises(broken):
            converse_stream(client)
    with Store(store_path) as store:
        assert list(Exchanges(store).scan()) == []
