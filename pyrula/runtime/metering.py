"""What a model call cost: usage read from the recorded reply, priced from a packaged table."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pyrula.transport.eventstream import is_eventstream
from pyrula.transport.framing import SSEDecoder, eventstream_documents


@dataclass(frozen=True, slots=True)
class Usage:
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # A reply sent with status 200 that still reports a failed call: the OpenAI Responses
    # terminal event (`error`, `response.failed`) or a non-streamed response whose status is
    # `failed`. It was billed, so it is metered, but it is not a success.
    error: str | None = None

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


def _documents(body: bytes, streamed: bool) -> list[Any]:
    if streamed and is_eventstream(body):  # Bedrock: converse-stream, invoke-with-response-stream
        return [_without_invocation_metrics(doc) for doc in eventstream_documents(body)]
    if not streamed:
        try:
            return [json.loads(body)]
        except (ValueError, RecursionError):
            return []
    decoder = SSEDecoder()
    found = []
    for event in [*decoder.feed(body), *decoder.close()]:
        try:
            found.append(json.loads(event.data))
        except (ValueError, RecursionError):
            continue
    return found


# Where streamed events carry what the model generated: text and tool-call arguments (OpenAI's
# `content`, `arguments` and Responses `delta`; Anthropic's `text` and `partial_json`; Gemini's
# `text` and `args`; Bedrock's `text` and `input`).
_GENERATED = frozenset({"content", "arguments", "delta", "text", "partial_json", "args", "input"})
_BYTES_PER_TOKEN = 4


def arrived_output_tokens(body: bytes, streamed: bool) -> int:
    """Output a stream cut short had already sent, text and tool arguments alike, at four bytes
    a token: an estimate for when its own usage never arrived."""
    size = 0
    for doc in _documents(body, streamed):
        if isinstance(doc, dict) and str(doc.get("type", "")).endswith(".done"):
            continue  # Responses repeats each finished part whole
        stack: list[Any] = [doc]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, dict):
                for key, value in item.items():
                    if key in _GENERATED and isinstance(value, str):
                        size += len(value)
                    elif key == "args" and isinstance(value, dict):  # Gemini's functionCall
                        size += len(json.dumps(value))
                    else:
                        stack.append(value)
    return size // _BYTES_PER_TOKEN


def _without_invocation_metrics(doc: Any) -> Any:
    # Bedrock repeats the model's usage in its own `amazon-bedrock-invocationMetrics` on the last
    # chunk: reading both would count the call twice.
    if isinstance(doc, dict) and "amazon-bedrock-invocationMetrics" in doc:
        return {k: v for k, v in doc.items() if k != "amazon-bedrock-invocationMetrics"}
    return doc


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def usage_from_reply(surface: str, body: bytes, streamed: bool) -> Usage:
    """Read token usage the way each provider reports it (a stream: its cumulative counts)."""
    model: str | None = None
    error: str | None = None
    inp = out = cache_read = cache_write = 0
    for doc in _documents(body, streamed):
        if not isinstance(doc, dict):
            continue
        if surface.startswith("anthropic."):
            message = doc.get("message") if doc.get("type") == "message_start" else doc
            if isinstance(message, dict):
                model = message.get("model") or model
                usage = message.get("usage") or {}
                inp = _int(usage.get("input_tokens")) or inp
                cache_read = _int(usage.get("cache_read_input_tokens")) or cache_read
                cache_write = _int(usage.get("cache_creation_input_tokens")) or cache_write
                out = _int(usage.get("output_tokens")) or out
            if doc.get("type") == "message_delta":
                out = _int((doc.get("usage") or {}).get("output_tokens")) or out
            continue
        if surface.startswith("gemini."):
            model = doc.get("modelVersion") or model
            meta = doc.get("usageMetadata") or {}
            if meta:
                cached = _int(meta.get("cachedContentTokenCount"))
                prompt = _int(meta.get("promptTokenCount")) + _int(
                    meta.get("toolUsePromptTokenCount")
                )
                inp, cache_read = prompt - cached, cached
                out = _int(meta.get("candidatesTokenCount")) + _int(meta.get("thoughtsTokenCount"))
            continue
        if surface == "openai.responses":
            if doc.get("type") == "error":
                error = "error"
            response = doc.get("response") if "response" in doc else doc
            if not isinstance(response, dict):
                continue
            # Every lifecycle event carries the response: a failed one may have no usage.
            model = response.get("model") or model
            if response.get("status") == "failed":
                error = "response.failed"
            if response.get("usage"):
                usage = response["usage"]
                cached = _int((usage.get("input_tokens_details") or {}).get("cached_tokens"))
                inp, cache_read = _int(usage.get("input_tokens")) - cached, cached
                out = _int(usage.get("output_tokens"))
            continue
        model = doc.get("model") or model
        usage = doc.get("usage") or {}
        if usage:
            if "inputTokens" in usage:  # Bedrock converse
                inp, out = _int(usage.get("inputTokens")), _int(usage.get("outputTokens"))
                cache_read = _int(usage.get("cacheReadInputTokens"))
                cache_write = _int(usage.get("cacheWriteInputTokens"))
            else:
                cached = _int((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
                inp, cache_read = _int(usage.get("prompt_tokens")) - cached, cached
                out = _int(usage.get("completion_tokens"))
    return Usage(model, inp, out, cache_read, cache_write, error)


# An application inference profile's id is random: nothing in the ARN names the model.
_PROFILE_ARN = re.compile(r"^arn:aws[\w-]*:bedrock:[^:]*:\d*:application-inference-profile/")


def requested_model(meta: Mapping[str, Any]) -> str | None:
    """The model a request names (Bedrock converse keeps it as `modelId`, from its path)."""
    model = meta.get("model", meta.get("modelId"))
    return model if isinstance(model, str) and model else None


def deployment(meta: Mapping[str, Any]) -> str | None:
    """The name a call was addressed to when it is an opaque alias whose model only the reply
    names (an Azure deployment, a Bedrock application inference profile ARN), else None."""
    name = meta.get("deployment")  # Azure's `/deployments/<name>/...` path
    if isinstance(name, str) and name:
        return name
    model = requested_model(meta)
    if model is None:
        return None
    query = meta.get("query")
    if isinstance(query, dict) and "api-version" in query:
        return model  # an Azure route without a deployment path: the body's model names one
    return model if _PROFILE_ARN.match(model) else None


_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?(?:openai|anthropic|google|meta|amazon)[./]")
_SUFFIXES = (
    re.compile(r"-v\d+(?::\d+)?$"),  # Bedrock version tags
    re.compile(r"-\d+:\d+$"),  # Bedrock's OpenAI ids (openai.gpt-oss-120b-1:0)
    re.compile(r"@\d{8}$"),  # Vertex dates
    re.compile(r"-\d{4}-\d{2}-\d{2}$"),  # OpenAI snapshot dates
    re.compile(r"-\d{8}$"),  # Anthropic snapshot dates
    re.compile(r"-latest$"),
)


def canonical_model(model: str) -> str:
    """`us.anthropic.claude-haiku-4-5-20251001-v1:0` and `claude-haiku-4-5@20251001` ->
    `claude-haiku-4-5`; `openai/gpt-4o-2024-08-06` -> `gpt-4o`."""
    name = model.strip().lower().rsplit("/", 1)[-1] if "/" in model else model.strip().lower()
    name = _PREFIX.sub("", name)
    changed = True
    while changed:
        changed = False
        for pattern in _SUFFIXES:
            trimmed = pattern.sub("", name)
            if trimmed != name:
                name, changed = trimmed, True
    return name


class PriceTable:
    """USD per million tokens by canonical model id; rows you add win over packaged ones."""

    def __init__(self) -> None:
        raw = json.loads(resources.files("pyrula.runtime").joinpath("prices.json").read_text())
        self._rows: dict[str, dict[str, float]] = {
            k: v for k, v in raw.items() if not k.startswith("_")
        }

    def add(
        self,
        model: str,
        *,
        input: float,
        output: float,
        cache_read: float | None = None,
        cache_write: float | None = None,
    ) -> None:
        row = {"input": input, "output": output}
        if cache_read is not None:
            row["cache_read"] = cache_read
        if cache_write is not None:
            row["cache_write"] = cache_write
        self._rows[model] = row
        self._rows[canonical_model(model)] = row

    def row(self, model: str | None) -> dict[str, float] | None:
        if not model:
            return None
        return self._rows.get(model) or self._rows.get(canonical_model(model))

    def cost(self, usage: Usage, model: str | None = None) -> float | None:
        row = self.row(model or usage.model)
        if row is None:
            return None
        per = 1_000_000
        return (
            usage.input_tokens * row["input"]
            + usage.output_tokens * row["output"]
            + usage.cache_read_tokens * row.get("cache_read", row["input"])
            + usage.cache_write_tokens * row.get("cache_write", row["input"])
        ) / per


prices = PriceTable()
