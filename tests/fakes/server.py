"""A scripted stand-in provider for proxy tests: a real HTTP/1.1 server on 127.0.0.1.

It is the stdlib's threading server (not the proxy's own h11 code), optionally over TLS, and it
logs every request that reached it. A `Script` says what to answer: status, headers, frames sent
as separate chunks, and optionally a gate the first frame waits behind before the rest follow.
"""

from __future__ import annotations

import gzip
import json
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Script:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    frames: list[bytes] = field(default_factory=list)
    chunked: bool = False  # else one body with a Content-Length
    gate: threading.Event | None = None  # the frames after the first wait for it
    pause_s: float = 0.0
    compress: bool = False  # gzip the body (Content-Encoding: gzip)


Reply = Callable[[Seen], Script]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    upstream: ScriptedUpstream


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        upstream = self.server.upstream
        with upstream.lock:
            upstream.seen.append(seen)
        script = upstream.reply(seen)
        frames = script.frames
        if script.compress:
            frames = [gzip.compress(b"".join(frames))]
        self.send_response(script.status)
        for name, value in script.headers.items():
            self.send_header(name, value)
        if script.compress:
            self.send_header("content-encoding", "gzip")
        if script.chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(sum(len(f) for f in frames)))
        self.end_headers()
        try:
            for index, frame in enumerate(frames):
                if index == 1 and script.gate is not None and not self._wait(script.gate):
                    with upstream.lock:
                        upstream.cancelled += 1
                    self.close_connection = True
                    return
                if index and script.pause_s:
                    threading.Event().wait(script.pause_s)
                self.wfile.write(
                    f"{len(frame):x}\r\n".encode() + frame + b"\r\n" if script.chunked else frame
                )
                self.wfile.flush()
            if script.chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except OSError:
            with upstream.lock:
                upstream.cancelled += 1
            self.close_connection = True

    def _wait(self, gate: threading.Event) -> bool:
        """Wait for the gate; False if the proxy closed the connection meanwhile."""
        while not gate.wait(0.01):
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return False
                except OSError:
                    return False
        return True

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class ScriptedUpstream:
    def __init__(self, reply: Reply, *, tls: ssl.SSLContext | None = None) -> None:
        self.reply = reply
        self.seen: list[Seen] = []
        self.cancelled = 0
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.upstream = self
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


def sse(*events: dict[str, Any] | str) -> list[bytes]:
    """Frames of an OpenAI-style stream: `data: {json}` each, `[DONE]` given as a string."""
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]


def chat_chunks(words: list[str], *, done: bool = True) -> list[bytes]:
    base = {"id": "chatcmpl-up", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    events: list[dict[str, Any] | str] = [
        {**base, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
        for w in words
    ]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if done:
        events.append("[DONE]")
    return sse(*events)


def chat_json(text: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-up",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


SSE_HEADERS = {"content-type": "text/event-stream"}
