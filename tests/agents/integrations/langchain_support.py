"""The LangChain tests' shared pieces: chat models sending to the stand-in
provider, and a chat completion that asks for a tool."""

from __future__ import annotations

import json
from typing import Any

from langchain_openai import ChatOpenAI

from tests.fakes.openai_api import BASE_URL, chat_completion
from tests.fakes.provider import OPENAI_LIB, Reply, Upstream, json_reply

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
}


def reply_for(request: Any) -> Reply:
    """Answers each chat request by what it asks: a tool call when tools are offered and no
    tool result is in the conversation, a JSON object when a response format is asked for, else
    text echoing the last message."""
    body = json.loads(request.content)
    last = body["messages"][-1]
    if body.get("tools") and last["role"] != "tool":
        message = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
        completion = chat_completion("")
        completion["choices"][0].update(message=message, finish_reason="tool_calls")
        return json_reply(completion)
    if body.get("response_format"):
        return json_reply(chat_completion('{"city": "Oslo", "degrees": 21}'))
    return json_reply(chat_completion(f"answer to {last['content']}"))


def chat_upstream() -> Upstream:
    return Upstream(OPENAI_LIB, reply_for)


def chat_openai(upstream: Upstream, *, journal: bool = False, **kw: Any) -> ChatOpenAI:
    """A `ChatOpenAI` on the stand-in (on Pyrula's transport already when `journal`)."""
    kw.setdefault("max_retries", 0)
    return ChatOpenAI(
        model="gpt-4o-mini",
        api_key="sk-unused",  # type: ignore[arg-type]
        base_url=BASE_URL,
        http_async_client=upstream.http_client(is_async=True, journal={} if journal else None),
        http_client=upstream.http_client(journal={} if journal else None),
        **kw,
    )
