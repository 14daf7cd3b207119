"""The stand-in provider as a real HTTP/1.1 server on 127.0.0.1 (the stdlib's threading server,
not the proxy's own h11 code), optionally over TLS.

Clients that bring their own HTTP stack (botocore's urllib3 pool, the proxy, a subprocess) talk
to it over a socket. Each request is logged as a `Seen`, then answered by the next queued
`Script` or else by the reply function: status, headers, frames sent as separate writes (as
chunks when `chunked`), optionally gated, paused, gzipped, cut off or left hanging.
"""

from __future__ import annotations

import gzip
import json
import select
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import httpx


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
    compress: bool | str = False  # True or "gzip", "br", "zstd": the body in that coding
    # "end": finish the reply; "reset": drop the connection after the frames (mid-stream);
    # "hang": send nothing more until the server closes (the client's read timeout fires).
    then: Literal["end", "reset", "hang"] = "end"
    hang_first: bool = False  # hang before the status line: a read timeout with nothing back


Reply = Callable[[Seen], Script]


def serving(reply: Callable[[Any], tuple[int, dict[str, str], list[bytes]]]) -> Reply:
    """The reply function of an in-process stand-in (`provider.Upstream.reply`, say
    `openai_api.upstream().reply`) answering on this server: the same provider, over a socket."""

    def script(seen: Seen) -> Script:
        url = f"http://127.0.0.1{seen.path}"
        request = httpx.Request(seen.method, url, headers=seen.headers, content=seen.body)
        status, headers, frames = reply(request)
        return Script(status=status, headers=headers, frames=frames, chunked=True)

    return script


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    upstream: Server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        try:
            body = self.rfile.read(length) if length else b""
        except OSError:
            body = b""
        if len(body) < length:
            # The client went away mid-request (a SIGKILLed worker): a provider never gets to
            # such a request, so it is neither answered nor counted as seen.
            self.close_connection = True
            return
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        script = self.server.upstream.answer(seen)
        if script.hang_first:
            self.server.upstream.released.wait(10)
            return
        # `{authorization}` in a scripted body echoes the request's signature back, as a
        # careless error message might.
        echoed = (self.headers.get("authorization") or "").encode()
        frames = [frame.replace(b"{authorization}", echoed) for frame in script.frames]
        coding = "gzip" if script.compress is True else script.compress or ""
        if coding:
            frames = [_compress(coding, b"".join(frames))]
        self.send_response(script.status)
        for name, value in script.headers.items():
            self.send_header(name, value)
        if coding:
            self.send_header("content-encoding", coding)
        if script.chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("content-length", str(sum(len(f) for f in frames)))
        self.end_headers()
        try:
            self._send(script, frames)
        except OSError:
            self._cancelled()

    def _send(self, script: Script, frames: list[bytes]) -> None:
        for index, frame in enumerate(frames):
            if index == 1 and script.gate is not None and not self._wait(script.gate):
                self._cancelled()
                return
            if index and script.pause_s:
                threading.Event().wait(script.pause_s)
            self.wfile.write(
                f"{len(frame):x}\r\n".encode() + frame + b"\r\n" if script.chunked else frame
            )
            self.wfile.flush()
        if script.then == "hang":
            self.server.upstream.released.wait(10)
        elif script.then == "reset":
            # An RST instead of the last chunk: the client's read fails mid-body.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        elif script.chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _cancelled(self) -> None:
        upstream = self.server.upstream
        with upstream.lock:
            upstream.cancelled += 1
        self.close_connection = True

    def _wait(self, gate: threading.Event) -> bool:
        """Wait for the gate; False if the client closed the connection meanwhile."""
        # poll(), not select(): a test process may hold more than 1,024 descriptors.
        watch = select.poll()
        watch.register(self.connection, select.POLLIN)
        while not gate.wait(0.01):
            if watch.poll(0):
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return False
                except OSError:
                    return False
        return True

    do_GET = do_POST = do_PUT = do_DELETE = _serve


def _compress(coding: str, body: bytes) -> bytes:
    if coding == "br":
        import brotli

        return bytes(brotli.compress(body))
    if coding == "zstd":
        import zstandard

        return bytes(zstandard.ZstdCompressor().compress(body))
    return gzip.compress(body)


class Server:
    """`with Server(reply) as server:` serves on `server.url` until the block ends.

    The log: `seen` (every request), `cancelled` (replies the client walked away from).
    """

    def __init__(self, reply: Reply, *scripts: Script, tls: ssl.SSLContext | None = None) -> None:
        self.reply = reply
        self.scripts = list(scripts)
        self.seen: list[Seen] = []
        self.cancelled = 0
        self.lock = threading.Lock()
        self.released = threading.Event()
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

    def script(self, *scripts: Script) -> None:
        """Answer the next requests with `scripts`, in order, before the reply function."""
        with self.lock:
            self.scripts.extend(scripts)

    def answer(self, seen: Seen) -> Script:
        with self.lock:
            self.seen.append(seen)
            queued = self.scripts.pop(0) if self.scripts else None
        return queued or self.reply(seen)

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def __enter__(self) -> Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
