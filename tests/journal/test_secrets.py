"""No credential ever reaches the store: plant them everywhere, record, scan the raw files."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import httpx2
import openai
import pytest

import pyrula
from tests.fakes.anthropic_api import anthropic_client, anthropic_message
from tests.fakes.openai_api import chat_completion, openai_client
from tests.fakes.provider import (
    ANTHROPIC_LIB,
    OPENAI_LIB,
    TEST_KEY,
    Upstream,
    ask,
    journal_transport,
    json_reply,
)

GOOGLE_KEY = "AIzaSyPlantedGoogleKey0123456789abcdefgh"
AZURE_KEY = "azure-planted-key-0f1e2d3c4b5a69788796a5b4"
AWS_KEY_ID = "AKIAPLANTEDKEY123456"
AWS_SIGNATURE = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
AWS_SESSION_TOKEN = "FQoGZXIvYXdzEPlantedSessionToken0123456789abcdef"
COOKIE = "session=planted-cookie-value-0123456789"
SET_COOKIE = "__cf_bm=planted-set-cookie-0123456789abcdef"
ECHOED = "sk-proj-EchoedInErrorBody0123456789abcdef"
BEARER = "planted.bearer.token.0123456789abcdef"

SECRETS = [
    TEST_KEY,
    GOOGLE_KEY,
    AZURE_KEY,
    AWS_KEY_ID,
    AWS_SIGNATURE,
    AWS_SESSION_TOKEN,
    COOKIE,
    "planted-cookie-value",
    SET_COOKIE,
    ECHOED,
    BEARER,
]


def _raw_store(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("lib", sorted({OPENAI_LIB, ANTHROPIC_LIB, httpx, httpx2}, key=str))
def test_planted_secrets_never_reach_the_store_files(store_path, lib):
    def reply(request):
        path = request.url.path
        if path.endswith("/chat/completions"):
            status, headers, frames = json_reply(chat_completion("ok"))
            return status, {**headers, "set-cookie": SET_COOKIE}, frames
        if path.endswith("/v1/messages"):
            return json_reply(anthropic_message("ok"))
        if path.endswith("/fail"):
            body = {
                "error": {
                    "message": f"Incorrect API key provided: {ECHOED}. "
                    f"Header was Bearer {BEARER} from {AWS_KEY_ID}"
                }
            }
            return json_reply(body, 401)
        return json_reply({"candidates": [], "echo": "fine"})

    with pyrula.cassette("secrets", store=store_path):
        if lib is OPENAI_LIB:
            openai_client(Upstream(lib, reply)).chat.completions.create(
                model="m", messages=ask("hi"), extra_headers={"cookie": COOKIE}
            )
        if lib is ANTHROPIC_LIB:
            anthropic_client(Upstream(lib, reply)).messages.create(
                model="claude", max_tokens=5, messages=ask("hi")
            )
        raw = lib.Client(transport=journal_transport(lib, Upstream(lib, reply).transport()))
        raw.post(
            f"https://generativelanguage.test/v1beta/models/g:generateContent?key={GOOGLE_KEY}",
            headers={"x-goog-api-key": GOOGLE_KEY},
            json={"contents": [{"parts": [{"text": "hi"}]}]},
        )
        raw.post(
            "https://azure.test/openai/deployments/d/chat/completions?api-version=2024-10-21",
            headers={"api-key": AZURE_KEY},
            json={"messages": ask("hi")},
        )
        raw.post(
            "https://bedrock-runtime.test/model/m/converse?X-Amz-Credential="
            f"{AWS_KEY_ID}%2F20250101&X-Amz-Signature={AWS_SIGNATURE}",
            headers={
                "authorization": f"AWS4-HMAC-SHA256 Credential={AWS_KEY_ID}/20250101/us-east-1/"
                f"bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature={AWS_SIGNATURE}",
                "x-amz-security-token": AWS_SESSION_TOKEN,
                "cookie": COOKIE,
            },
            json={"messages": [{"role": "user", "content": [{"text": "hi"}]}]},
        )
        failed = raw.post(
            "https://api.openai.test/v1/fail",
            headers={"authorization": f"Bearer {BEARER}"},
            json={"q": 1},
        )
        assert failed.status_code == 401

    raw_bytes = _raw_store(store_path)
    assert len(raw_bytes) > 0
    for secret in SECRETS:
        assert secret.encode() not in raw_bytes, f"{secret!r} reached the store"


def test_the_scrubbed_error_body_still_replays(store_path):
    upstream = Upstream(
        httpx2, lambda r: json_reply({"error": {"message": f"bad key {ECHOED}"}}, 401)
    )
    client = httpx2.Client(transport=journal_transport(httpx2, upstream.transport()))
    with pyrula.cassette("err", store=store_path):
        live = client.post("https://api.test/v1/x", json={"a": 1})
    with pyrula.cassette("err", mode="none", store=store_path):
        replayed = client.post("https://api.test/v1/x", json={"a": 1})
    assert replayed.status_code == live.status_code == 401
    message = json.loads(replayed.content)["error"]["message"]
    assert ECHOED not in message and message.startswith("bad key ")


@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_each_of_a_repeated_credential_header_is_masked_where_it_echoes(store_path, lib):
    # Two `cookie` headers (and two `x-api-key`s): a reply that echoes one of them alone must
    # not keep it, though the stack also shows them joined ("a, b") as one value.
    first, second = "session=first-planted-cookie-0123", "theme=second-planted-cookie-4567"
    keys = ["key-one-planted-0123456789", "key-two-planted-9876543210"]
    upstream = Upstream(lib, lambda r: json_reply({"saw": [second, keys[1]], "ok": True}))
    client = lib.Client(transport=journal_transport(lib, upstream.transport()))
    headers = [("cookie", first), ("cookie", second), ("x-api-key", keys[0])]
    with pyrula.cassette("repeated", store=store_path):
        live = client.post(
            "https://api.test/v1/x", json={"a": 1}, headers=[*headers, ("x-api-key", keys[1])]
        )
    assert second in live.text  # the caller gets the reply as it came
    raw = _raw_store(store_path)
    for secret in (first, second, *keys):
        assert secret.encode() not in raw, f"{secret!r} reached the store"


def _split_everywhere(body: bytes, secret: bytes) -> list[list[bytes]]:
    """The body cut in two at every offset inside `secret` (the first occurrence)."""
    at = body.index(secret)
    return [[body[: at + k], body[at + k :]] for k in range(1, len(secret))]


def _exports(store: Path, tmp_path: Path) -> bytes:
    """Every export format of the store, as bytes (jsonl, har)."""
    from typer.testing import CliRunner

    from pyrula.cli.app import app

    found = b""
    for fmt in ("jsonl", "har"):
        out = tmp_path / f"export.{fmt}"
        result = CliRunner().invoke(
            app, ["journal", "export", "--store", str(store), "-f", fmt, "-o", str(out)]
        )
        assert result.exit_code == 0, result.output
        found += out.read_bytes()
    return found


def _pieces_of(secret: str) -> list[bytes]:
    """The secret and each of its halves long enough to be its own (a split leaves both)."""
    return [secret[:k].encode() for k in range(10, len(secret) + 1)] + [
        secret[k:].encode() for k in range(0, len(secret) - 9)
    ]


@pytest.mark.parametrize("kind", ["stream", "error"])
def test_a_credential_split_across_reply_chunks_is_scrubbed_at_every_offset(
    store_path, tmp_path, kind
):
    from tests.fakes.openai_api import SSE_HEADERS, chat_chunks

    key = TEST_KEY.encode()
    if kind == "stream":
        body = b"".join(chat_chunks([f"your key is {TEST_KEY}", " indeed"]))
        status, headers = 200, SSE_HEADERS
    else:
        error = {"error": {"message": f"Incorrect API key provided: {TEST_KEY}", "code": "bad"}}
        body, status = json.dumps(error).encode(), 401
        headers = {"content-type": "application/json"}
    splits = _split_everywhere(body, key)
    served: list[list[bytes]] = []

    def reply(request):
        frames = splits[len(served)]
        served.append(frames)
        return status, headers, frames

    client = openai_client(Upstream(OPENAI_LIB, reply), api_key=TEST_KEY, max_retries=0)
    with pyrula.cassette("split", "once", store=store_path):
        for n in range(len(splits)):
            messages = ask(f"question {n}")
            if kind == "stream":
                stream = client.chat.completions.create(model="m", messages=messages, stream=True)
                text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                assert TEST_KEY in text  # the caller gets the live reply unchanged
            else:
                with pytest.raises(openai.AuthenticationError):
                    client.chat.completions.create(model="m", messages=messages)
    assert len(served) == len(splits)
    raw = _raw_store(store_path) + _exports(store_path, tmp_path)
    assert [p for p in _pieces_of(TEST_KEY) if p in raw] == []
    # The replay keeps the live chunking around the mask: one frame before it, one after.
    from pyrula.journal import Exchanges, Store

    with Store(store_path) as opened:
        exchanges = Exchanges(opened)
        counts = {record.frames for _key, record in exchanges.scan()}
    assert counts == {2}
