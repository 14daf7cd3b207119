"""The Bedrock runtime, stood in on 127.0.0.1 for the boto3 drop-in's tests: AWS event-stream
frames, converse replies plain and streamed, errors, and a real boto3 client sending to it.

A real HTTP/1.1 server (`server.Server`), so botocore signs with SigV4, sends through its own
urllib3 pool and reads the reply as it would from AWS. Each request takes the next scripted
`Answer` (a converse reply when none is left) and is logged with its headers and body.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import struct
from typing import Any

import boto3
from botocore.config import Config

from tests.fakes.server import Script, Server

CONTENT_TYPE = "application/vnd.amazon.eventstream"

# Fake credentials, shaped like real ones so the store scan would catch them.
ACCESS_KEY = "AKIAPYRULATEST000042"
SECRET_KEY = "pyrula/secret+Key0123456789abcdefghijklmn"
SESSION_TOKEN = "FwoGZXIvYXdzEPyrulaSessionToken0123456789abcdefghijklmnopqrstuvwxyz"
MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
USAGE = {"inputTokens": 11, "outputTokens": 4, "totalTokens": 15}


# A Bedrock answer: every frame written as an HTTP chunk.
Answer = functools.partial(Script, chunked=True)


def _string_header(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message, as Bedrock sends it (prelude, CRCs and all), written out
    here by hand rather than by the library under test."""
    encoded = b"".join(_string_header(name, value) for name, value in headers.items())
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message))


def converse_reply(text: str = "Pong.", usage: dict[str, int] | None = None) -> Script:
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


def stream_answer(frames: list[bytes], then: str = "end") -> Script:
    headers = {"content-type": CONTENT_TYPE, "x-amzn-RequestId": "req-stream-1"}
    return Answer(headers=headers, frames=frames, then=then)


def error_answer(status: int, code: str, message: str, request_id: str = "req-err-1") -> Script:
    headers = {
        "content-type": "application/json",
        "x-amzn-RequestId": request_id,
        "x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/",
    }
    return Answer(
        status=status, headers=headers, frames=[json.dumps({"message": message}).encode()]
    )


class BedrockStub(Server):
    """`with BedrockStub(*answers) as stub:` serves on `stub.url` until the block ends, and
    closes the clients `client(stub)` made for it then."""

    def __init__(self, *answers: Script) -> None:
        super().__init__(lambda seen: converse_reply(), *answers)
        self.clients: list[Any] = []

    def __exit__(self, *exc: object) -> None:
        # A run's agent body stays registered, so a client it holds would keep its pooled
        # socket open until the interpreter's exit.
        while self.clients:
            self.clients.pop().close()
        super().__exit__(*exc)


def client(stub: Any, *, attempts: int = 1, **config: Any) -> Any:
    """A real boto3 `bedrock-runtime` client signing with fake credentials, sending to `stub`
    (a `BedrockStub` closes it as its block ends)."""
    made = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=stub.url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=SESSION_TOKEN,
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}, **config),
    )
    if isinstance(stub, BedrockStub):
        stub.clients.append(made)
    return made
