"""The UI's test pieces: the page served on a free loopback port, and a real Chromium to drive.

The browser is Debian's `chromium` package driven by Playwright's driver (no browser download):
`PYRULA_CHROMIUM` names another binary. Missing, the browser tests fail (never skip) saying how
to install it.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page
from starlette.applications import Starlette

from pyrula.ui import create_app
from pyrula.ui.serve import AppServer
from pyrula.workflows import WorkflowContext, workflow
from tests.runtime.support import ask, async_openai, chat_upstream

ROOT = Path(__file__).parents[2]
CHROMIUM = os.environ.get("PYRULA_CHROMIUM", "/usr/bin/chromium")
INSTALL_HINT = (
    f"the UI's browser tests need Chromium at {CHROMIUM}: install it with "
    "`apt-get install -y chromium` (Debian; .ci/run does this), or point PYRULA_CHROMIUM at a "
    "Chromium binary"
)
# PYRULA_UPDATE_SCREENSHOTS=1 writes the screenshots into docs/img (what docs/ui.md shows);
# otherwise they go to the test's tmp folder.
SCREENSHOTS = ROOT / "docs" / "img"
UPSTREAM = chat_upstream()


@workflow(name="ui_two_calls")
async def two_calls(ctx: WorkflowContext, ticket: str) -> str:
    """A run the pages show: two model calls (the second asks about the first's answer) with a
    step between them."""
    client = async_openai(UPSTREAM)
    first = await ask(client, f"summarise {ticket}")
    await ctx.step("file", lambda: f"filed {ticket}")
    return await ask(client, f"reply to {first}")


def screenshot_dir(tmp_path: Path) -> Path:
    return SCREENSHOTS if os.environ.get("PYRULA_UPDATE_SCREENSHOTS") == "1" else tmp_path


def shot(page: Page, tmp_path: Path, name: str) -> None:
    """Screenshot the whole page as `ui-NAME.png` (see `screenshot_dir`)."""
    target = screenshot_dir(tmp_path) / f"ui-{name}.png"
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 0


def chromium() -> str:
    """The Chromium binary, or a failure saying how to install it."""
    found = shutil.which(CHROMIUM) or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if found is None:
        raise AssertionError(INSTALL_HINT)
    return found


@contextmanager
def served(store: Path, token: str | None = None, app: Starlette | None = None) -> Iterator[str]:
    """`pyrula ui` over `store` (or `app`) on a free 127.0.0.1 port, in a thread, by the server
    `pyrula ui` runs; yields its base URL. Leaving stops it, and fails if it did not stop (a
    live stream left open would hold it)."""
    app = app or create_app(store, token=token)
    server = AppServer(app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise AssertionError("the UI server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
    assert not thread.is_alive(), "the UI server did not stop within 30 s"
