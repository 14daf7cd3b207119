"""Workflows and agents by name: a name belongs to one body, which a worker looks up to run."""

from __future__ import annotations

import pytest

from pyrula.runtime import AgentContext, WorkflowContext, agent, workflow
from pyrula.runtime.registry import lookup


@workflow(name="registry-one-body")
async def first_body(ctx: WorkflowContext) -> str:
    return "first"


def test_another_body_under_a_taken_name_is_refused_naming_both():
    with pytest.raises(ValueError, match="already registered") as refused:

        @agent(name="registry-one-body")
        async def second_body(ctx: AgentContext) -> str:
            return "second"

    message = str(refused.value)
    assert "first_body" in message and "second_body" in message and "name=" in message
    assert lookup("registry-one-body").fn is first_body.fn  # the first one still runs


def _defined(result: str):
    """The same function defined again, as a reloaded module or a re-run notebook cell does."""

    @workflow(name="registry-redefined")
    async def body(ctx: WorkflowContext) -> str:
        return result

    return body


def test_the_same_function_defined_again_replaces_its_definition():
    _defined("old")
    newer = _defined("new")
    assert lookup("registry-redefined") is newer
