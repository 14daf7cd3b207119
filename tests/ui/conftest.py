"""Fixtures: a store recorded from real OpenAI SDK calls, and Chromium driven by Playwright."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

import pyrula
from tests.cli.support import STORY, Provider, ask, ask_streamed, make_client
from tests.ui.support import chromium


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Cassette `chat` (two plain calls that differ in their question and model) and cassette
    `chat-stream` (a streamed call)."""
    path = tmp_path / "store"
    provider = Provider()
    client = make_client(provider)
    with pyrula.cassette("chat", store=path):
        ask(client, "Ping?")
        ask(client, "Pong?", model="gpt-y")
    with pyrula.cassette("chat-stream", store=path):
        assert ask_streamed(client, "Tell a story") == STORY
    assert len(provider.calls) == 3
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium()  # fails, saying how to install it, when it is missing
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.set_default_timeout(30_000)
    try:
        yield opened
    finally:
        context.close()
