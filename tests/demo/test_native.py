"""The demo's native agent: its own loop with a @tool (and an MCP server's tool where the mcp SDK
is installed), live against the stand-in, then replayed from its journal with nothing sent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pyrula.demo import native


def test_the_native_agent_runs_live_then_replays_with_no_request_and_no_tool_run(tmp_path: Path):
    result = native.run_native(tmp_path / "store")

    assert result.failures() == []
    assert result.provider_calls_live == 2  # one turn asks for the tools, one answers
    assert result.provider_calls_replay == 0
    assert result.replayed_answer == result.answer
    assert "packed, waiting for the carrier" in str(result.answer)
    with_mcp = importlib.util.find_spec("mcp") is not None
    assert result.with_mcp is with_mcp
    expected = ["tool order_status Where is order A-7?"]
    if with_mcp:
        expected.append("mcp carrier_eta Where is order A-7?")
        assert "the carrier expects it on Thursday" in str(result.answer)
    assert sorted(result.effects) == sorted(expected)
