"""The Gemini API, stood in: reply builders (plain and streamed), the surfaces the drop-in's
tests call, and real google-genai clients over a MockTransport."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.provider import GENAI_LIB, TEST_KEY, Reply, Upstream, json_reply

MODEL = "gemini-test"
BASE_URL = "http://genai.test"
ANSWER = '{"answer": "Pong."}'
USAGE = {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10}

_JOB = {"name": "batches/b1", "metadata": {"state": "BATCH_STATE_PENDING"}}
_TUNING = {
    "name": "tunedModels/t1/operations/o1",
    "metadata": {"tunedModel": "tunedModels/t1", "totalSteps": 1},
}


def candidate(text: str, finish: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, **extra}
    if finish is not None:
        found["finishReason"] = finish
    return found


def response(text: str = ANSWER, **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [candidate(text, **extra)],
        "usageMetadata": USAGE,
        "modelVersion": MODEL,
    }


def sse(chunks: list[dict[str, Any]]) -> list[bytes]:
    """Gemini's wire format: `data: {...}` and a CRLF blank line, no end marker."""
    return [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks]


def stream_chunks(words: str = "Pong .", usage: dict[str, Any] = USAGE) -> list[dict[str, Any]]:
    parts = words.split(" ")
    chunks: list[dict[str, Any]] = [
        {"candidates": [candidate(w + " ", finish=None)], "modelVersion": MODEL} for w in parts[:-1]
    ]
    chunks.append(
        {"candidates": [candidate(parts[-1])], "usageMetadata": usage, "modelVersion": MODEL}
    )
    return chunks


def _reply(request: Any) -> Reply:
    path = request.url.path
    verb = path.rsplit(":", 1)[-1] if ":" in path.rsplit("/", 1)[-1] else ""
    if verb == "generateContent":
        return json_reply(response())
    if verb == "streamGenerateContent":
        return 200, {"content-type": "text/event-stream"}, sse(stream_chunks())
    if verb in ("batchGenerateContent", "asyncBatchEmbedContent"):
        return json_reply(_JOB)
    if path.endswith("/tunedModels") and request.method == "POST":
        return json_reply(_TUNING)
    if verb == "countTokens":
        return json_reply({"totalTokens": 3})
    if verb in ("embedContent", "batchEmbedContents"):
        return json_reply({"embeddings": [{"values": [0.5, 0.25]}]})
    if verb == "predict":
        return json_reply({"predictions": []})
    return json_reply({"name": path.rsplit("/", 1)[-1]})


def upstream(reply: Any = _reply) -> Upstream:
    """A stub Gemini API; `.seen` lists each request that reached it as "METHOD path:verb"."""
    return Upstream(GENAI_LIB, reply, ("/v1beta", "/v1"))


def http_options(stub: Upstream, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": BASE_URL,
        "client_args": {"transport": stub.transport()},
        "async_client_args": {"transport": stub.transport()},
        **extra,
    }


def make_client(stub: Upstream, cls: Any = None, **extra: Any) -> Any:
    """A drop-in client (or `cls`, e.g. the SDK's own) sending to `stub`."""
    from pyrula.agents.compat import genai

    cls = cls or genai.Client
    return cls(api_key=TEST_KEY, http_options=http_options(stub, **extra))
