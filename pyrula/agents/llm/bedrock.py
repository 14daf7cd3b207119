"""`BedrockLLM`: Amazon Bedrock's Converse API over HTTP, signed with botocore's SigV4 signer."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import httpx2

from pyrula.agents.llm.client import LLM, Turn, loads_arguments
from pyrula.agents.llm.messages import (
    Delta,
    Image,
    Message,
    ModelReply,
    OutputSpec,
    Part,
    Text,
    TextDelta,
    ToolArgsDelta,
    ToolCall,
    ToolSpec,
)
from pyrula.errors import MissingExtra
from pyrula.fingerprints import surfaces
from pyrula.transport.eventstream import EventStreamDecoder


def _signer() -> Any:
    try:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.session import get_session
    except ImportError as exc:
        raise MissingExtra(
            "BedrockLLM's SigV4 signing",
            "bedrock",
            (exc.name,),
            needs="botocore",
            alternative="pass api_key= a Bedrock API key",
        ) from exc
    return SigV4Auth, AWSRequest, get_session


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"text": part.text}
    if isinstance(part, Image):
        kind = part.media_type.rpartition("/")[2]
        return {"image": {"format": kind, "source": {"bytes": part.b64}}}
    if isinstance(part, ToolCall):
        return {"toolUse": {"toolUseId": part.id, "name": part.name, "input": part.arguments}}
    return {
        "toolResult": {
            "toolUseId": part.call_id,
            "content": [{"text": part.content}],
            "status": "error" if part.is_error else "success",
        }
    }


def decode_blocks(blocks: Sequence[dict[str, Any]]) -> tuple[Part, ...]:
    parts: list[Part] = []
    for block in blocks:
        if block.get("text"):
            parts.append(Text(block["text"]))
        elif "toolUse" in block:
            use = block["toolUse"]
            parts.append(ToolCall(use["toolUseId"], use["name"], dict(use.get("input") or {})))
    return tuple(parts)


class BedrockLLM(LLM):
    """Bedrock Converse over HTTP: `BedrockLLM("us.anthropic.claude-haiku-4-5-...")`.

    Signed with SigV4 from the usual AWS credentials (`pip install 'pyrula[bedrock]'` for
    botocore's signer), or sent with a Bedrock API key (`api_key=` or
    `AWS_BEARER_TOKEN_BEDROCK`). `region=` else `AWS_REGION` / `AWS_DEFAULT_REGION`.
    Structured output is a forced tool call."""

    surface = surfaces.BEDROCK_CONVERSE
    rate_key = "bedrock"
    env_key = "AWS_BEARER_TOKEN_BEDROCK"
    native_output = False

    def __init__(self, model: str, *, region: str | None = None, **kwargs: Any) -> None:
        self.region = (
            region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or "us-east-1"
        )
        self.default_base_url = f"https://bedrock-runtime.{self.region}.amazonaws.com"
        super().__init__(model, **kwargs)
        self._credentials: Any = None

    def url(self, *, stream: bool) -> str:
        verb = "converse-stream" if stream else "converse"
        return f"{self.base_url}/model/{self.model}/{verb}"

    def headers(self) -> dict[str, str]:
        key = self._api_key or os.environ.get(self.env_key)
        return {"authorization": f"Bearer {key}"} if key else {}

    def prepare(self, request: httpx2.Request) -> httpx2.Request:
        if "authorization" in request.headers:
            return request
        sigv4, aws_request, get_session = _signer()
        if self._credentials is None:
            self._credentials = get_session().get_credentials()
        if self._credentials is None:
            raise ImportError(
                "BedrockLLM found no AWS credentials: set them as for boto3 or pass api_key="
            )
        signed = aws_request(
            method="POST",
            url=str(request.url),
            data=request.content,
            headers={"content-type": "application/json"},
        )
        sigv4(self._credentials, "bedrock", self.region).add_auth(signed)
        headers = dict(signed.headers.items())
        return httpx2.Request("POST", request.url, headers=headers, content=request.content)

    def encode(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None,
        tools: Sequence[ToolSpec],
        output: OutputSpec | None,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": [
                {"role": m.role, "content": [_block(p) for p in m.parts]} for m in messages
            ],
            "inferenceConfig": {"maxTokens": self.max_tokens},
        }
        if instructions:
            body["system"] = [{"text": instructions}]
        specs = list(tools)
        if output is not None:
            specs.append(ToolSpec(output.name, "Give the final answer.", output.schema))
        if specs:
            config: dict[str, Any] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": s.name,
                            "description": s.description,
                            "inputSchema": {"json": s.parameters},
                        }
                    }
                    for s in specs
                ]
            }
            if output is not None:
                config["toolChoice"] = {"any": {}} if tools else {"tool": {"name": output.name}}
            body["toolConfig"] = config
        return body

    def decode(self, data: Any) -> ModelReply:
        message = (data.get("output") or {}).get("message") or {}
        return self.reply(
            decode_blocks(message.get("content") or []), data.get("stopReason"), None, data
        )

    def stream_decoder(self) -> Any:
        return EventStreamDecoder()

    def events(self, decoder: Any, chunk: bytes) -> list[Any]:
        if not chunk:
            return []
        return [
            {"event": m.event_type, **json.loads(m.payload or b"{}")}
            for m in decoder.feed(chunk)
            if m.message_type == "event"
        ]

    def stream_turn(self) -> Turn:
        return _ConverseTurn(self)


class _ConverseTurn(Turn):
    def __init__(self, llm: BedrockLLM) -> None:
        super().__init__(llm)
        self._blocks: dict[int, dict[str, Any]] = {}
        self._stop: str | None = None

    def feed(self, event: Any) -> list[Delta]:
        self._events.append({k: v for k, v in event.items() if k != "event"})
        kind = event.get("event")
        index = int(event.get("contentBlockIndex", 0))
        if kind == "contentBlockStart":
            use = (event.get("start") or {}).get("toolUse")
            if use:
                self._blocks[index] = {"id": use["toolUseId"], "name": use["name"], "json": ""}
        elif kind == "contentBlockDelta":
            delta = event.get("delta") or {}
            block = self._blocks.setdefault(index, {"text": ""})
            if "text" in delta:
                block["text"] = block.get("text", "") + delta["text"]
                return [TextDelta(delta["text"])]
            if "toolUse" in delta:
                piece = delta["toolUse"].get("input", "")
                block["json"] += piece
                return [ToolArgsDelta(index, block.get("name"), piece)]
        elif kind == "messageStop":
            self._stop = event.get("stopReason")
        return []

    def finish(self) -> ModelReply:
        parts: list[Part] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if "name" in block:
                parts.append(ToolCall(block["id"], block["name"], loads_arguments(block["json"])))
            elif block.get("text"):
                parts.append(Text(block["text"]))
        return self._reply(parts, self._stop, None)
