"""The boto3 Bedrock drop-in's surface table, row by row against the spec, each row exercised on a
real boto3 client inside a run: journaled, passed through (sent again on resume) or refused
before anything is signed or sent."""

from __future__ import annotations

import json
from typing import Any

import botocore.exceptions
import pytest

from pyrula.agents import AgentContext, UnjournaledSurface, agent
from pyrula.agents.compat.bedrock import TABLE, journaled_bedrock
from pyrula.runtime import answer
from tests.agents.compat.support import (
    MESSAGES,
    Case,
    arrives_later,
    assert_unavailable,
    converse,
    llm_done,
)
from tests.fakes import bedrock_api as bs
from tests.runtime.support import drive, new_store, run_to_rest

# The spec's "Amazon Bedrock (boto3)" section, as data.
EXPECTED = {
    "converse": "journaled",
    "converse_stream": "journaled",
    "count_tokens": "passed through",
    "apply_guardrail": "passed through",
    "get_async_invoke": "passed through",
    "list_async_invokes": "passed through",
    "invoke_model": "refused",
    "invoke_model_with_response_stream": "refused",
    "invoke_model_with_bidirectional_stream": "refused",
    "start_async_invoke": "refused",
}

_JSON = {"content-type": "application/json"}
CALLS: dict[str, tuple[dict[str, Any], bs.Answer]] = {
    "converse": ({"modelId": bs.MODEL_ID, "messages": MESSAGES}, bs.converse_reply()),
    "converse_stream": (
        {"modelId": bs.MODEL_ID, "messages": MESSAGES},
        bs.stream_answer(bs.converse_events(["Hi"])),
    ),
    "count_tokens": (
        {"modelId": bs.MODEL_ID, "input": {"converse": {"messages": MESSAGES}}},
        bs.Answer(headers=_JSON, frames=[b'{"inputTokens": 5}']),
    ),
    "apply_guardrail": (
        {
            "guardrailIdentifier": "g1",
            "guardrailVersion": "1",
            "source": "INPUT",
            "content": [{"text": {"text": "hi"}}],
        },
        bs.Answer(headers=_JSON, frames=[b'{"action": "NONE", "outputs": [], "assessments": []}']),
    ),
    "get_async_invoke": (
        {"invocationArn": "arn:aws:bedrock:us-east-1:123456789012:async-invoke/abc"},
        bs.Answer(headers=_JSON, frames=[b'{"status": "Completed"}']),
    ),
    "list_async_invokes": ({}, bs.Answer(headers=_JSON, frames=[b'{"asyncInvokeSummaries": []}'])),
    "invoke_model": ({"modelId": bs.MODEL_ID, "body": b"{}"}, bs.converse_reply()),
    "invoke_model_with_response_stream": ({"modelId": bs.MODEL_ID, "body": b"{}"}, bs.Answer()),
    "start_async_invoke": (
        {
            "modelId": bs.MODEL_ID,
            "modelInput": {},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://b/k"}},
        },
        bs.Answer(),
    ),
}
# In the spec's table, but this boto3 builds no method for it (it needs a bidirectional stream).
NO_METHOD = {"invoke_model_with_bidirectional_stream"}


def test_the_table_is_the_spec_table():
    assert {row.path: row.verdict.value for row in TABLE.rows} == EXPECTED
    assert set(CALLS) | NO_METHOD == set(EXPECTED)


def test_an_operation_this_boto3_adds_is_refused_until_classified():
    with bs.BedrockStub() as stub:
        operations = set(bs.client(stub).meta.method_to_api_mapping)
    for name in operations - set(EXPECTED):
        row = TABLE.classify(name)
        assert row.verdict.value == "refused" and "not classified" in row.fix, name


def call(name: str) -> Any:
    kwargs = CALLS[name][0]

    def invoke(client: Any) -> Any:
        result = getattr(client, name)(**kwargs)
        if name == "converse_stream":
            return list(result["stream"])
        return {k: v for k, v in result.items() if k != "ResponseMetadata"}

    return invoke


@pytest.mark.parametrize("name", sorted(CALLS))
def test_surface_row_in_a_run(name):
    verdict = EXPECTED[name]
    since = arrives_later(TABLE, name)
    if since:  # the installed boto3 predates this operation: the drop-in names the release
        with bs.BedrockStub() as stub:
            assert_unavailable(journaled_bedrock(bs.client(stub)), name, since)
        return
    answers = [CALLS[name][1]] * 2
    with bs.BedrockStub(*answers) as stub:
        case = Case(stub, f"bedrock_row_{name}")
        handle = case.run(call(name))
    if verdict == "refused":
        assert case.sent == [0, 0]
        for kind, exc in case.results:
            assert kind == "error" and isinstance(exc, UnjournaledSurface)
            assert f"`{name}` cannot be journaled in a run" in str(exc)
            assert "use `converse" in str(exc) or "ctx.step" in str(exc)
        return
    assert [kind for kind, _ in case.results] == ["ok", "ok"]
    assert case.results[0][1] == case.results[1][1]
    if verdict == "passed through":
        assert case.sent == [1, 1]  # sent again on resume, never journaled
        assert llm_done(handle) == []
    else:
        assert case.sent == [1, 0]
        assert len(llm_done(handle)) == 1


def _unclassified_operations() -> list[str]:
    """The operations this botocore models that the table has no row for (they come and go)."""
    with bs.BedrockStub() as stub:
        operations = bs.client(stub).meta.method_to_api_mapping
    listed = {row.path for row in TABLE.rows}
    return sorted(name for name in operations if name not in listed)


def test_an_unclassified_operation_is_refused_in_a_run():
    unclassified = _unclassified_operations()
    if not unclassified:  # an older botocore: every operation it models has its row
        assert all(TABLE.classify(name).path == name for name in _operations())
        return
    name = unclassified[0]
    with bs.BedrockStub() as stub:
        case = Case(stub, "bedrock_row_unclassified")
        case.run(lambda c: getattr(c, name)())
    assert case.sent == [0, 0]
    [(_, exc), _] = case.results
    assert isinstance(exc, UnjournaledSurface) and "not classified" in str(exc)


def test_outside_a_run_a_refused_operation_passes_through():
    with bs.BedrockStub(bs.converse_reply()) as stub:
        client = journaled_bedrock(bs.client(stub))
        reply = client.invoke_model(modelId=bs.MODEL_ID, body=b"{}")
        assert json.loads(reply["body"].read())["stopReason"] == "end_turn"
        assert stub.count() == 1


# -- tools ------------------------------------------------------------------------------------

_SPEC_TOOL = {"toolSpec": {"name": "lookup", "inputSchema": {"json": {"type": "object"}}}}


@pytest.mark.parametrize(
    ("tools", "refused"),
    [
        pytest.param([_SPEC_TOOL, {"cachePoint": {"type": "default"}}], None, id="toolSpec"),
        pytest.param([{"systemTool": {"name": "nova_grounding"}}], None, id="nova_grounding"),
        pytest.param([{"systemTool": {"name": "nova_code_interpreter"}}], "systemTool", id="other"),
    ],
)
def test_server_run_system_tools_are_refused_but_nova_grounding(tools, refused):
    with bs.BedrockStub(bs.converse_reply()) as stub:
        case = Case(stub, f"bedrock_tools_{refused}_{len(tools)}")
        case.run(lambda c: converse(c, toolConfig={"tools": tools}))
    if refused is None and any("systemTool" in t for t in tools) and not _models_system_tools():
        # botocore before 1.40.62 has no `systemTool`: it refuses the field itself, unsent.
        assert case.sent == [0, 0] and case.results[0][0] == "error"
        assert isinstance(case.results[0][1], botocore.exceptions.ParamValidationError)
        return
    if refused is None:
        assert case.sent == [1, 0] and case.results[0][0] == "ok"
        return
    assert case.sent == [0, 0]
    [(_, exc), _] = case.results
    assert isinstance(exc, UnjournaledSurface)
    assert "nova_code_interpreter" in str(exc) and "toolSpec" in str(exc)


def _operations() -> list[str]:
    with bs.BedrockStub() as stub:
        return sorted(bs.client(stub).meta.method_to_api_mapping)


def _models_system_tools() -> bool:
    with bs.BedrockStub() as stub:
        return "SystemTool" in bs.client(stub).meta.service_model.shape_names


# -- where the call is made -------------------------------------------------------------------


def test_a_call_on_the_runs_loop_thread_is_refused_before_sending():
    caught: list[BaseException] = []
    with bs.BedrockStub() as stub:

        @agent(name="bedrock_loop_thread")
        async def body(ctx: AgentContext) -> None:
            client = journaled_bedrock(bs.client(stub))
            try:
                converse(client)
            except UnjournaledSurface as exc:
                caught.append(exc)

        run_to_rest(body)
        assert stub.count() == 0
    [exc] = caught
    assert "ctx.to_thread" in str(exc)


def test_in_a_step_a_converse_call_is_metered_and_the_step_replays():
    sent: list[tuple[int, str]] = []
    with bs.BedrockStub(bs.converse_reply("Stepped.")) as stub:

        @agent(name="bedrock_in_a_step")
        async def body(ctx: AgentContext) -> None:
            client = journaled_bedrock(bs.client(stub))

            async def ask() -> str:
                reply = await ctx.to_thread(converse, client)
                return str(reply["output"]["message"]["content"][0]["text"])

            before = stub.count()
            text = await ctx.step("ask", ask)
            sent.append((stub.count() - before, text))
            await ctx.interrupt("go on?")

        store = new_store()
        handle = run_to_rest(body, store=store)
        answer(handle.id, "yes", store=store)
        drive(store)
    assert handle.record.status == "completed"
    assert sent == [(1, "Stepped."), (0, "Stepped.")]  # the step's result replays
    [done] = llm_done(handle)
    assert done["within"] == "step" and done["position"] is None
    assert (done["input_tokens"], done["output_tokens"]) == (11, 4)
