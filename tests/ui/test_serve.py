"""`pyrula ui` as a user starts it: a real process serving the page on the address it prints."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.ui.support import ROOT


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_pyrula_ui_serves_the_store_it_is_given_until_interrupted(store: Path) -> None:
    port = _free_port()  # a port picked in advance, as a user would pass one
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pyrula.cli.app",
            "ui",
            "--store",
            str(store),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"pyrula ui: http://127.0.0.1:{port}/"), first
        assert str(store) in first
        page = httpx.get(f"http://127.0.0.1:{port}/exchanges", timeout=30)
        assert page.status_code == 200
        assert "chat-stream" in page.text
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)  # waits, and closes its pipes
    assert process.returncode in (0, 130)  # 130: ended by Ctrl-C, as a shell reports it
    assert "Traceback" not in err
