"""instructor with Bedrock: journal first, then `instructor.from_bedrock(..., BEDROCK_TOOLS)`; the
structured call is one journaled converse, replayed on resume with nothing sent.

instructor caps jiter below what openai 3.x needs, so it is installed beside openai 2.x only.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from tests.agents.compat.support import Case, llm_done
from tests.fakes import bedrock_api as bs

instructor = pytest.importorskip("instructor")


class Person(BaseModel):
    name: str
    age: int


def tool_use_reply(data: dict[str, Any]) -> bs.Answer:
    tool_use = {"toolUse": {"toolUseId": "tooluse_1", "name": "Person", "input": data}}
    body = {
        "output": {"message": {"role": "assistant", "content": [tool_use]}},
        "stopReason": "tool_use",
        "usage": bs.USAGE,
        "metrics": {"latencyMs": 3},
    }
    headers = {"content-type": "application/json", "x-amzn-RequestId": "req-tool-1"}
    return bs.Answer(headers=headers, frames=[json.dumps(body).encode()])


@pytest.mark.filterwarnings("ignore:Mode.BEDROCK_TOOLS is deprecated:DeprecationWarning")
def test_instructor_from_a_journaled_client_replays_the_structured_call():
    def extract(client: Any) -> Person:
        structured = instructor.from_bedrock(client, mode=instructor.Mode.BEDROCK_TOOLS)
        return structured.create(
            modelId=bs.MODEL_ID,
            messages=[{"role": "user", "content": "Ada, 36."}],
            response_model=Person,
            max_retries=0,
        )

    with bs.BedrockStub(tool_use_reply({"name": "Ada", "age": 36})) as stub:
        case = Case(stub, "bedrock_instructor")
        handle = case.run(extract)
        sent = stub.seen[0].json()
    assert case.sent == [1, 0]
    assert [r.model_dump() for _, r in case.results] == [{"name": "Ada", "age": 36}] * 2
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": "Person"}}
    assert len(llm_done(handle)) == 1


@pytest.mark.filterwarnings("ignore:Mode.BEDROCK_TOOLS is deprecated:DeprecationWarning")
def test_journaled_refuses_an_instructor_client():
    from pyrula.agents.compat.bedrock import journaled_bedrock

    with bs.BedrockStub() as stub:
        wrapped = instructor.from_bedrock(bs.client(stub), mode=instructor.Mode.BEDROCK_TOOLS)
        with pytest.raises(TypeError, match="from_bedrock\\(journaled\\(client\\)"):
            journaled_bedrock(wrapped)
