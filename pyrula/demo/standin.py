"""A stand-in model provider on 127.0.0.1: plays OpenAI chat and Anthropic messages, offline.

It is a real HTTP server (stdlib `ThreadingHTTPServer` on a background thread, random free port),
so the real SDKs talk to it over a real socket, exactly as they would to the provider. Replies
are deterministic text derived from the last user message; ids are fresh per request served, so
a reply replayed from a journal is recognisably the recorded one and not a new answer.

Streams follow the providers' wire formats: OpenAI sends `data: {chunk}` events ending with
`data: [DONE]` (plus a usage chunk with `choices: []` when `stream_options.include_usage` is set);
Anthropic sends `event:`/`data:` pairs from `message_start` to `message_stop`. Every event is
written and flushed on its own, with a short pause, as a chunk of a chunked HTTP/1.1 reply.

The server keeps its own log of every request it received: that log, not the client's view, is
the source of truth for how many calls reached the provider. Each entry also carries the
request's identity (a digest of its method, path and body), so a request asked twice is seen as
one request received twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NamedTuple

OPENAI_CHAT_PATH = "/v1/chat/completions"
ANTHROPIC_MESSAGES_PATH = "/v1/messages"
CHUNK_PAUSE_S = 0.005


class Served(NamedTuple):
    """One request the stand-in received."""

    path: str
    streamed: bool


class Received(NamedTuple):
    """One request the stand-in received, with what identifies it."""

    path: str
    streamed: bool
    digest: str  # sha256 of the method, path and body (its canonical JSON when it is JSON)
    prompt: str  # the last user message's text, for showing
    at: float  # time.time() when it arrived

    @property
    def served(self) -> Served:
        return Served(self.path, self.streamed)


def request_digest(method: str, path: str, raw: bytes, body: Any) -> str:
    """What identifies a request: method, path and body, key order and whitespace aside."""
    data = (
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        if body is not None
        else raw
    )
    return hashlib.sha256(f"{method} {path}".encode() + b"\x00" + data).hexdigest()


def last_user_text(messages: Any) -> str:
    """The text of the last user message, for either provider's message shape."""
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, dict) and part.get("type") in ("text", "input_text")
            )
    return ""


def reply_text(provider: str, prompt: str) -> str:
    """The stand-in's deterministic answer to `prompt`."""
    words = prompt.split()
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:6]
    last = words[-1] if words else ""
    return f"{provider} stand-in #{digest}: {len(words)} words, the last {last!r}."


def tool_calls(body: dict[str, Any], prompt: str, number: int) -> list[dict[str, Any]] | None:
    """A request offering tools gets one call of each, its string parameters filled with the
    prompt; once the conversation holds their results, None (answer in words). No tools: []."""
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return []
    messages = body.get("messages") or []
    if any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
        return None
    calls = []
    for i, tool in enumerate(tools):
        function = tool.get("function", {}) if isinstance(tool, dict) else {}
        params = function.get("parameters", {}).get("properties", {})
        arguments = {name: prompt for name, spec in params.items() if spec.get("type") == "string"}
        calls.append(
            {
                "id": f"call_standin{number}_{i}",
                "type": "function",
                "function": {"name": function.get("name", ""), "arguments": json.dumps(arguments)},
            }
        )
    return calls


def tool_results(body: dict[str, Any]) -> list[str]:
    return [
        str(m.get("content"))
        for m in body.get("messages") or []
        if isinstance(m, dict) and m.get("role") == "tool"
    ]


def _pieces(text: str) -> list[str]:
    """Split `text` into stream deltas that join back to exactly `text`."""
    pieces: list[str] = []
    for index, word in enumerate(text.split(" ")):
        pieces.append(word if index == 0 else " " + word)
    return pieces


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: StandIn


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each event leaves as soon as it is written
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def setup(self) -> None:
        super().setup()
        self.server.standin._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.standin._closed(self.connection)

    # -- requests ----------------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        streamed = isinstance(body, dict) and body.get("stream") is True
        standin = self.server.standin
        prompt = last_user_text(body.get("messages")) if isinstance(body, dict) else ""
        number = standin._log_request(
            Received(path, streamed, request_digest("POST", path, raw, body), prompt, time.time())
        )
        if not isinstance(body, dict):
            self._json(HTTPStatus.BAD_REQUEST, _error("invalid_request_error", "body is not JSON"))
            return
        if path == OPENAI_CHAT_PATH:
            self._openai_chat(body, number, streamed)
        elif path == ANTHROPIC_MESSAGES_PATH:
            self._anthropic_messages(body, number, streamed)
        else:
            self._json(HTTPStatus.NOT_FOUND, _error("not_found_error", f"no route {path}"))

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        self.server.standin._log_request(
            Received(path, False, request_digest("GET", path, b"", None), "", time.time())
        )
        self._json(HTTPStatus.NOT_FOUND, _error("not_found_error", f"no route {path}"))

    # -- OpenAI chat completions -------------------------------------------------------------------

    def _openai_chat(self, body: dict[str, Any], number: int, streamed: bool) -> None:
        prompt = last_user_text(body.get("messages"))
        text = reply_text("openai", prompt)
        calls = tool_calls(body, prompt, number) if not streamed else []
        if calls is None:  # the tools have answered: the final answer quotes them
            text = f"{text} (from the tools: {'; '.join(tool_results(body))})"
        model = str(body.get("model", "gpt-standin"))
        ident = f"chatcmpl-standin{number}{self.server.standin.nonce}"
        created = int(time.time())
        usage = {
            "prompt_tokens": _tokens(prompt),
            "completion_tokens": _tokens(text),
            "total_tokens": _tokens(prompt) + _tokens(text),
        }
        if not streamed:
            self._json(
                HTTPStatus.OK,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "system_fingerprint": "fp_standin",
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": None if calls else text,
                                "refusal": None,
                                **({"tool_calls": calls} if calls else {}),
                            },
                            "logprobs": None,
                            "finish_reason": "tool_calls" if calls else "stop",
                        }
                    ],
                    "usage": usage,
                },
            )
            return

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            data = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_standin",
                "choices": choices,
                **extra,
            }
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        def delta(content: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}]

        options = body.get("stream_options")
        wants_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        extra: dict[str, Any] = {"usage": None} if wants_usage else {}
        events = [chunk(delta({"role": "assistant", "content": ""}), **extra)]
        events += [chunk(delta({"content": piece}), **extra) for piece in _pieces(text)]
        events.append(chunk(delta({}, "stop"), **extra))
        if wants_usage:
            events.append(chunk([], usage=usage))
        events.append(b"data: [DONE]\n\n")
        self._stream(events)

    # -- Anthropic messages ------------------------------------------------------------------------

    def _anthropic_messages(self, body: dict[str, Any], number: int, streamed: bool) -> None:
        prompt = last_user_text(body.get("messages"))
        text = reply_text("anthropic", prompt)
        model = str(body.get("model", "claude-standin"))
        ident = f"msg_standin{number}{self.server.standin.nonce}"
        input_tokens, output_tokens = _tokens(prompt), _tokens(text)
        if not streamed:
            self._json(
                HTTPStatus.OK,
                {
                    "id": ident,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
                },
            )
            return

        def event(name: str, data: dict[str, Any]) -> bytes:
            payload = json.dumps({"type": name, **data}).encode()
            return b"event: " + name.encode() + b"\ndata: " + payload + b"\n\n"

        events = [
            event(
                "message_start",
                {
                    "message": {
                        "id": ident,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                    }
                },
            ),
            event(
                "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            ),
            event("ping", {}),
        ]
        events += [
            event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}})
            for p in _pieces(text)
        ]
        events += [
            event("content_block_stop", {"index": 0}),
            event(
                "message_delta",
                {
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
            ),
            event("message_stop", {}),
        ]
        self._stream(events)

    # -- writing -----------------------------------------------------------------------------------

    def _json(self, status: HTTPStatus, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.send_header("x-request-id", f"req_standin_{self.server.standin.nonce}")
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _stream(self, events: list[bytes]) -> None:
        """Send each event as its own HTTP chunk, flushed, with a short pause between them."""
        self.send_response(HTTPStatus.OK)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-request-id", f"req_standin_{self.server.standin.nonce}")
        self.end_headers()
        self.wfile.flush()
        for index, data in enumerate(events):
            if index:
                time.sleep(CHUNK_PAUSE_S)
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class StandIn:
    """The stand-in provider. Use `start()`/`stop()` or `with StandIn() as standin:`."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.nonce = ""
        self._log: list[Received] = []
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self._counter = itertools.count(1)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> StandIn:
        if self._server is not None:
            raise RuntimeError("the stand-in is already running")
        self.nonce = hashlib.sha256(str(time.time_ns()).encode()).hexdigest()[:8]
        server = _Server((self.host, 0), _Handler)
        server.standin = self
        self._server = server
        self._port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="pyrula-standin",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection: nothing reaches it afterwards."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- where and what ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("the stand-in has not been started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def log(self) -> list[Served]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return [received.served for received in self._log]

    @property
    def received(self) -> list[Received]:
        """Every request received so far, in order, with its identity (a copy)."""
        with self._lock:
            return list(self._log)

    def count(self) -> int:
        with self._lock:
            return len(self._log)

    # -- called by the handler ---------------------------------------------------------------------

    def _log_request(self, received: Received) -> int:
        with self._lock:
            self._log.append(received)
            return next(self._counter)

    def _opened(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)


__all__ = [
    "ANTHROPIC_MESSAGES_PATH",
    "OPENAI_CHAT_PATH",
    "Received",
    "Served",
    "StandIn",
    "last_user_text",
    "reply_text",
    "request_digest",
]
