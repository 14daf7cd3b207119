"""The fallback for chat models whose HTTP client is out of reach: the `ChatResult` journaled.

The call is journaled as one exchange through Pyrula's own transport, with an in-process
"provider" that runs the wrapped model: the request is the call's canonical JSON (messages,
stop, tools, tool choice, response format, the other bound arguments), the reply the result
serialised with LangChain's message dicts plus its usage in the OpenAI shape, which the meter
reads. So the run session does for it what it does for any model call: a position, the caps
before sending, one `llm:done`, replay with nothing sent, and `ReplayInputChanged` when the
request differs. The wrapped model's own HTTP requests go past the journal (never counted twice).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatResult

from pyrula.runtime.calls import bypassing
from pyrula.transport import AsyncHttpxTransport

# A host no resolver answers: the request never leaves the process.
_HOST = "http://langchain.pyrula.invalid"
# Message fields that differ between identical calls (ids minted per run, timings, usage).
_UNCOMPARED = ("id", "response_metadata", "usage_metadata")


def _json_default(value: Any) -> Any:
    schema = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema):
        return {"schema": schema()}
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else repr(value)


def _compared_message(message: BaseMessage) -> dict[str, Any]:
    described = message_to_dict(message)
    data = {k: v for k, v in described["data"].items() if k not in _UNCOMPARED}
    return {"type": described["type"], "data": data}


def request_body(
    model: Any, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
) -> bytes:
    """The call as the journal compares it."""
    arguments = {k: v for k, v in kwargs.items() if not k.startswith("ls_")}
    body = {
        "model": type(model).__name__,
        "messages": [_compared_message(m) for m in messages],
        "stop": stop,
        "arguments": arguments,
    }
    return json.dumps(body, sort_keys=True, default=_json_default).encode()


def _usage(result: ChatResult) -> dict[str, int]:
    inp = out = 0
    for generation in result.generations:
        usage = getattr(generation.message, "usage_metadata", None) or {}
        inp += int(usage.get("input_tokens", 0))
        out += int(usage.get("output_tokens", 0))
    return {"prompt_tokens": inp, "completion_tokens": out, "total_tokens": inp + out}


def _reply_body(model_name: str, result: ChatResult) -> bytes:
    generations = [
        {"message": message_to_dict(g.message), "generation_info": g.generation_info}
        for g in result.generations
    ]
    body = {
        "model": model_name,
        "usage": _usage(result),
        "generations": generations,
        "llm_output": result.llm_output,
    }
    return json.dumps(body, default=_json_default).encode()


def _result(body: bytes) -> ChatResult:
    data = json.loads(body)
    generations = [
        ChatGeneration(
            message=messages_from_dict([g["message"]])[0], generation_info=g["generation_info"]
        )
        for g in data["generations"]
    ]
    return ChatResult(generations=generations, llm_output=data.get("llm_output"))


class _InProcessProvider(httpx.AsyncBaseTransport):
    """Answers the journal transport's live request by running the wrapped model once."""

    def __init__(self, model_name: str, produce: Callable[[], Awaitable[ChatResult]]) -> None:
        self._model_name = model_name
        self._produce = produce

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        result = await bypassing(self._produce())
        body = _reply_body(self._model_name, result)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=body)


async def journaled_result(
    model: Any,
    body: bytes,
    produce: Callable[[], Awaitable[ChatResult]],
) -> ChatResult:
    """The call's result: replayed from the journal, or produced once and journaled."""
    name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or "")
    transport = AsyncHttpxTransport(_InProcessProvider(name, produce))
    async with httpx.AsyncClient(transport=transport) as client:
        reply = await client.post(
            f"{_HOST}/{type(model).__name__}/generate",
            content=body,
            headers={"content-type": "application/json"},
        )
    return _result(reply.content)
