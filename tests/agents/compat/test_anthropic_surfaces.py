"""The Anthropic drop-in's surface table, row by row, over a stand-in provider."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from pyrula.agents.compat._anthropic_surfaces import ANTHROPIC, SURFACES
from tests.agents.compat.support import anthropic_dropin, check_row
from tests.fakes.anthropic_api import MSG, upstream

_RAW = ("with_raw_response", "with_streaming_response")
_GEN = ("messages", "beta.messages")

# The spec's table, typed out independently of `_anthropic_surfaces.SURFACES`.
EXPECTED: dict[str, str] = {
    "messages.create": "journaled",
    "messages.stream": "journaled",
    "messages.parse": "journaled",
    "beta.messages.create": "journaled",
    "beta.messages.stream": "journaled",
    "beta.messages.parse": "journaled",
    "messages.batches.create": "journaled",
    "beta.messages.batches.create": "journaled",
    "beta.dreams.create": "journaled",
    "messages.count_tokens": "passed through",
    "beta.messages.count_tokens": "passed through",
    "messages.batches": "passed through",
    "beta.messages.batches": "passed through",
    "beta.dreams": "passed through",
    "models": "passed through",
    "files": "passed through",
    "beta.agents": "passed through",
    "completions": "refused",
    "beta.messages.thread": "refused",
    "beta.messages.tool_runner": "refused",
    "beta.sessions": "refused",
    "beta.deployments": "refused",
    "beta.deployment_runs": "refused",
    **{raw: "refused" for raw in _RAW},
    **{f"{base}.{raw}": "refused" for base in ("beta", *_GEN) for raw in _RAW},
    **{f"{base}.batches.{raw}": "refused" for base in _GEN for raw in _RAW},
}

_BATCH = {"requests": [{"custom_id": "a", "params": MSG}]}
_DREAM = {"inputs": [{"type": "sessions", "session_ids": ["s"]}], "model": "claude-test"}

# One call per row: (what the caller writes after `client.`, its arguments).
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "messages.create": ("messages.create", MSG),
    "messages.stream": ("messages.stream", MSG),
    "messages.parse": ("messages.parse", MSG),
    "beta.messages.create": ("beta.messages.create", MSG),
    "beta.messages.stream": ("beta.messages.stream", MSG),
    "beta.messages.parse": ("beta.messages.parse", MSG),
    "messages.batches.create": ("messages.batches.create", _BATCH),
    "beta.messages.batches.create": ("beta.messages.batches.create", _BATCH),
    "beta.dreams.create": ("beta.dreams.create", _DREAM),
    "messages.count_tokens": ("messages.count_tokens", {"model": "c", "messages": MSG["messages"]}),
    "beta.messages.count_tokens": (
        "beta.messages.count_tokens",
        {"model": "c", "messages": MSG["messages"]},
    ),
    "messages.batches": ("messages.batches.retrieve", {"message_batch_id": "msgbatch_1"}),
    "beta.messages.batches": ("beta.messages.batches.retrieve", {"message_batch_id": "msgbatch_1"}),
    "beta.dreams": ("beta.dreams.list", {}),
    "models": ("models.list", {}),
    "files": ("files.list", {}),
    "beta.agents": ("beta.agents.list", {}),
    "completions": ("completions.create", {"model": "c", "prompt": "p", "max_tokens_to_sample": 1}),
    "beta.messages.thread": ("beta.messages.thread", {}),
    "beta.messages.tool_runner": ("beta.messages.tool_runner", {**MSG, "tools": []}),
    "beta.sessions": ("beta.sessions.list", {}),
    "beta.deployments": ("beta.deployments.list", {}),
    "beta.deployment_runs": ("beta.deployment_runs.list", {}),
    **{raw: (f"{raw}.messages.create", MSG) for raw in _RAW},
    **{f"beta.{raw}": (f"beta.{raw}.messages.create", MSG) for raw in _RAW},
    **{f"{b}.{raw}": (f"{b}.{raw}.create", MSG) for b in _GEN for raw in _RAW},
    **{
        f"{b}.batches.{raw}": (f"{b}.batches.{raw}.create", _BATCH)
        for b in _GEN
        for raw in _RAW
    },
}  # fmt: skip


def _present(client: Any, call: str) -> bool:
    target = client
    for name in call.split("."):
        if not hasattr(target, name):
            return False
        target = getattr(target, name)
    return True


def test_the_table_is_the_spec_table():
    assert {row.path: row.verdict.value for row in SURFACES} == EXPECTED
    assert set(CALLS) == set(EXPECTED)


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_surface_row_in_a_run(path):
    verdict = EXPECTED[path]
    assert ANTHROPIC.classify(path).verdict.value == verdict
    stub = upstream()
    call = CALLS[path][0]
    if not _present(anthropic_dropin(stub), call):
        pytest.skip(f"anthropic {anthropic.__version__} has no `{call}`")
    follow_up = ("messages.create", {**MSG, "model": "claude-after"}, "POST /messages")
    check_row(verdict, path, CALLS[path], lambda: anthropic_dropin(stub), stub.seen, follow_up)
