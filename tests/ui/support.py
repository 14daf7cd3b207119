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

import uvicorn

from pyrula.ui import create_app

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


def screenshot_dir(tmp_path: Path) -> Path:
    return SCREENSHOTS if os.environ.get("PYRULA_UPDATE_SCREENSHOTS") == "1" else tmp_path


def chromium() -> str:
    """The Chromium binary, or a failure saying how to install it."""
    found = shutil.which(CHROMIUM) or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if found is None:
        raise AssertionError(INSTALL_HINT)
    return found


@contextmanager
def served(store: Path, token: str | None = None) -> Iterator[str]:
    """`pyrula ui` over `store` on a free 127.0.0.1 port, in a thread; yields its base URL."""
    app = create_app(store, token=token)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
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
