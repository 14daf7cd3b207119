"""What a provider's reply rules are: the shape of one row of the replies table.

A provider's replies differ in the ways Pyrula cares about: how a streamed reply says it is
finished, where it reports its token usage, where its events carry what the model wrote (the
text `pyrula journal show` joins; the output a stream cut short is estimated by), and where it
names the model that served it. Each provider module fills in one `ReplyRules`;
`pyrula.replies.rules_for(surface)` finds it. Everything here reads already-decoded frames and
parsed JSON documents: the byte-level SSE and event-stream framing belongs to the transports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ._json import parse_json


class SSEFrame(Protocol):
    """One server-sent event, as the transports' SSE decoder yields it."""

    @property
    def event(self) -> str: ...

    @property
    def data(self) -> str: ...


class AWSFrame(Protocol):
    """One AWS event-stream message, as the transports' event-stream decoder yields it."""

    @property
    def message_type(self) -> str: ...

    @property
    def event_type(self) -> str: ...

    @property
    def payload(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens one reply reports, and the model it names."""

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


# Given the request's compared and meta fields, a predicate that says whether a frame ends the
# reply. A factory, so a rule may keep state per reply (OpenAI chat counts finished choices).
SSEEndRule = Callable[[Mapping[str, Any], Mapping[str, Any]], Callable[[SSEFrame], bool]]
AWSEndRule = Callable[[Mapping[str, Any], Mapping[str, Any]], Callable[[AWSFrame], bool]]
# A reply's JSON documents (a plain body: one; a stream: one per event) -> its usage.
UsageParser = Callable[[Iterable[Any]], Usage]
# One streamed event's name and parsed JSON object -> (choice index, text piece) pairs.
TextRule = Callable[[str, dict[str, Any]], Iterator[tuple[int, str]]]
# A cut-short stream's documents -> how many bytes of output (text, tool arguments) had arrived.
ArrivedRule = Callable[[Iterable[Any]], int]


@dataclass(frozen=True, slots=True)
class ReplyRules:
    """One provider surface's reply rules. A missing end rule means the stream (of that kind)
    has no terminal frame: it is whole when the connection ends."""

    surface: str
    usage: UsageParser
    arrived: ArrivedRule
    sse_end: SSEEndRule | None = None
    eventstream_end: AWSEndRule | None = None  # Bedrock's AWS event-stream
    text: TextRule | None = None  # None: `pyrula journal show` shows the events, no text
    # Where a reply names the model that served it (`pyrula.verify` compares them).
    model_fields: tuple[str, ...] = ("model",)


Frame = TypeVar("Frame", SSEFrame, AWSFrame)


def stateless(
    predicate: Callable[[Frame], bool],
) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Callable[[Frame], bool]]:
    """An end rule that needs nothing from the request."""

    def build(compared: Mapping[str, Any], meta: Mapping[str, Any]) -> Callable[[Frame], bool]:
        return predicate

    return build


def event_type(frame: SSEFrame) -> str:
    """An SSE event's type: its `event:` name, else the `type` field of its JSON data."""
    if frame.event != "message":
        return frame.event
    data = parse_json(frame.data)
    return str(data.get("type", "")) if isinstance(data, dict) else ""


# Bytes of streamed output per token, for the estimate of a stream cut short.
BYTES_PER_TOKEN = 4


def generated_bytes(
    keys: frozenset[str], *, skip: Callable[[Any], bool] | None = None
) -> ArrivedRule:
    """An `ArrivedRule` that sums the string values under `keys` anywhere in each document
    (a JSON-object value under `args`, Gemini's function call arguments, counts serialised);
    `skip` leaves out documents that repeat output already counted."""

    def arrived(documents: Iterable[Any]) -> int:
        size = 0
        for document in documents:
            if skip is not None and skip(document):
                continue
            stack: list[Any] = [document]
            while stack:
                item = stack.pop()
                if isinstance(item, list):
                    stack.extend(item)
                elif isinstance(item, dict):
                    for key, value in item.items():
                        if key in keys and isinstance(value, str):
                            size += len(value)
                        elif key == "args" and "args" in keys and isinstance(value, dict):
                            size += len(json.dumps(value))
                        else:
                            stack.append(value)
        return size

    return arrived
