"""Fixtures: a store recorded from real OpenAI SDK calls, and `pyrula journal` to run on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import pyrula
from pyrula.cli.app import app
from tests.cli.support import STORY, Invoke, Provider, ask, ask_streamed, make_client


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def store(tmp_path: Path, provider: Provider) -> Path:
    """A store with cassette `chat` (two plain calls) and `chat-stream` (two streamed calls)."""
    path = tmp_path / "s"
    client = make_client(provider)
    with pyrula.cassette("chat", store=path):
        ask(client, "Ping?")
        ask(client, "Pong?", model="gpt-y")
    with pyrula.cassette("chat-stream", store=path):
        assert ask_streamed(client, "Tell a story") == STORY
        ask_streamed(client, "long")
    assert len(provider.calls) == 4
    return path


@pytest.fixture
def journal() -> Invoke:
    """Run `pyrula journal ARGS...` through the real app, returning the result."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        # A fixed width: the table drops columns on narrow terminals (xdist workers have none).
        env = {"PYRULA_STORE": None, "COLUMNS": "160"}
        return runner.invoke(app, ["journal", *args], input=input, env=env)

    return invoke
