"""A stand-in Bedrock runtime on 127.0.0.1 for the boto3 drop-in's tests.

A real HTTP/1.1 server (the stdlib's), so botocore signs with SigV4, sends through its own
urllib3 pool and reads the reply as it would from AWS. Each request takes the next scripted
`Answer` (a converse reply when none is left) and is logged with its headers and body.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
from botocore.config import Config

from pyrula.transport.eventstream import CONTENT_TYPE, encode_message

# Fake credentials, shaped like real ones so the store scan would catch them.
ACCESS_KEY = "AKIAPYRULATEST000042"
SECRET_KEY = "pyrula/secret+Key0123456789abcdefghijklmn"
SESSION_TOKEN = "FwoGZXIvYXdzEPyrulaSessionToken0123456789abcdefghijklmnopqrstuvwxyz"
MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
USAGE = {"inputTokens": 11, "outputTokens": 4, "totalTokens": 15}


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    frames: list[bytes] = field(default_factory=list)
    # "end": finish the reply; "reset": drop the connection after the frames (mid-stream);
    # "hang": send nothing more until the stub closes (the client's read timeout fires).
    then: str = "end"
    hang_first: bool = False  # hang before the status line: a read timeout with nothing back


def converse_reply(text: str = "Pong.", usage: dict[str, int] | None = None) -> Answer:
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": usage or USAGE,
        "metrics": {"latencyMs": 42},
    }
    return Answer(
        headers={"content-type": "application/json", "x-amzn-RequestId": "req-converse-1"},
        frames=[json.dumps(body).encode()],
    )


def event(kind: str, payload: dict[str, Any]) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, json.dumps(payload).encode())


def exception_event(kind: str, message: str) -> bytes:
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, json.dumps({"message": message}).encode())


def converse_events(words: list[str], *, metadata: bool = True) -> list[bytes]:
    """What Bedrock's converse-stream sends: messageStop, then metadata last."""
    frames = [event("messageStart", {"role": "assistant", "p": "abcd"})]
    for word in words:
        delta = {"contentBlockIndex": 0, "delta": {"text": word}, "p": "ab"}
        frames.append(event("contentBlockDelta", delta))
    frames.append(event("contentBlockStop", {"contentBlockIndex": 0}))
    frames.append(event("messageStop", {"stopReason": "end_turn"}))
    if metadata:
        frames.append(event("metadata", {"usage": USAGE, "metrics": {"latencyMs": 7}}))
    return frames


def anthropic_chunk(payload: dict[str, Any]) -> bytes:
    """One invoke-with-response-stream chunk: Anthropic's event JSON, base64 in `bytes`."""
    data = base64.b64encode(json.dumps(payload).encode()).decode()
    return event("chunk", {"bytes": data})


def stream_answer(frames: list[bytes], then: str = "end") -> Answer:
    headers = {"content-type": CONTENT_TYPE, "x-amzn-RequestId": "req-stream-1"}
    return Answer(headers=headers, frames=frames, then=then)


def error_answer(status: int, code: str, message: str, request_id: str = "req-err-1") -> Answer:
    headers = {
        "content-type": "application/json",
        "x-amzn-RequestId": request_id,
        "x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/",
    }
    return Answer(
        status=status, headers=headers, frames=[json.dumps({"message": message}).encode()]
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _serve(self) -> None:
        stub = self.server.stub
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        with stub.lock:
            stub.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            answer = stub.answers.pop(0) if stub.answers else converse_reply()
        if answer.hang_first:
            stub.released.wait(10)
            return
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        # `{authorization}` in a scripted body echoes the request's signature back, as a
        # careless error message might.
        echoed = (self.headers.get("authorization") or "").encode()
        for frame in (f.replace(b"{authorization}", echoed) for f in answer.frames):
            self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            self.wfile.flush()
        if answer.then == "hang":
            stub.released.wait(10)
        elif answer.then == "reset":
            # An RST instead of the last chunk: the client's read fails mid-body.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        else:
            self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: BedrockStub


class BedrockStub:
    """`with BedrockStub() as stub:` serves on `stub.url` until the block ends."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def script(self, *answers: Answer) -> None:
        with self.lock:
            self.answers.extend(answers)

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def __enter__(self) -> BedrockStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def client(stub: BedrockStub, *, attempts: int = 1, **config: Any) -> Any:
    """A real boto3 `bedrock-runtime` client signing with fake credentials, sending to `stub`."""
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=stub.url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=SESSION_TOKEN,
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}, **config),
    )
