"""A provider echoing the caller's key with a chunk boundary inside it, through the proxy: the
store and every export hold neither the key nor either half of it."""

from __future__ import annotations

import json
import threading

import httpx
from typer.testing import CliRunner

from pyrula.cli.app import app
from tests.fakes.server import Script, Server
from tests.proxy.support import KEY, routes_to, running, store_bytes


def test_a_key_split_across_upstream_chunks_is_scrubbed(store, tmp_path):
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    at = body.index(KEY.encode())
    offsets = [1, 5, len(KEY) // 2, len(KEY) - 1]
    gates: list[threading.Event] = []

    def script(seen) -> Script:
        k = offsets[len(gates)]
        gate = threading.Event()
        gates.append(gate)
        # The second half waits, so the proxy reads the two halves as two chunks.
        threading.Timer(0.1, gate.set).start()
        frames = [body[: at + k], body[at + k :]]
        return Script(status=401, frames=frames, chunked=True, gate=gate)

    with Server(script) as upstream, running(store, "record", routes=routes_to(upstream.url)) as p:
        url = p.base_url("openai") + "/v1/chat/completions"
        for n in range(len(offsets)):
            ask = {"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]}
            reply = httpx.post(url, json=ask, headers={"authorization": f"Bearer {KEY}"})
            assert reply.status_code == 401 and KEY in reply.text  # the client sees it live
    found = store_bytes(store)
    for fmt in ("jsonl", "har"):
        out = tmp_path / f"e.{fmt}"
        result = CliRunner().invoke(
            app, ["journal", "export", "--store", str(store), "-f", fmt, "-o", str(out)]
        )
        assert result.exit_code == 0, result.output
        found += out.read_bytes()
    halves = [KEY[:k] for k in offsets if k >= 10] + [
        KEY[k:] for k in offsets if len(KEY) - k >= 10
    ]
    assert [piece for piece in [KEY, *halves] if piece.encode() in found] == []
