"""OpenAI chat completions replies (and every OpenAI-compatible provider's, `openai_compatible`).

A stream is `data: {chunk}` events ending `data: [DONE]`; usage comes in a last chunk with
`choices: []` when the request set `stream_options.include_usage`. A stream that fails ends
instead with an error event (`event: error`, or a `data: {"error": ...}` chunk) and no `[DONE]`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pyrula.fingerprints import surfaces

from ._json import dicts, index, mapping, number, parse_json
from .openai_compatible import CACHED_AT, USAGE_AT
from .rules import ReplyRules, SSEFrame, Usage, generated_bytes


def wants_usage(meta: Mapping[str, Any]) -> bool:
    """Whether the request asked for the usage chunk (`stream_options.include_usage`)."""
    options = meta.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


class _Finished:
    """`[DONE]`, or every choice finished (and the usage chunk seen, when it was asked for)."""

    def __init__(self, choices: int, usage_wanted: bool) -> None:
        self._choices = max(choices, 1)
        self._usage_wanted = usage_wanted
        self._finished: set[int] = set()
        self._usage = False

    def __call__(self, frame: SSEFrame) -> bool:
        if frame.data.strip() == "[DONE]":
            return True
        chunk = parse_json(frame.data)
        if frame.event == "error" or (isinstance(chunk, dict) and "error" in chunk):
            # A failed stream (Groq and other OpenAI-compatible providers): `event: error` and
            # `data: {"error": ...}`, no [DONE]. The SDK raises APIError on it: the outcome.
            return True
        if not isinstance(chunk, dict):
            return False
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("finish_reason"):
                self._finished.add(int(choice.get("index", 0)))
        if reported_usage(chunk) is not None:
            self._usage = True
        return len(self._finished) >= self._choices and (self._usage or not self._usage_wanted)


def end(compared: Mapping[str, Any], meta: Mapping[str, Any]) -> Callable[[SSEFrame], bool]:
    """The end rule of one stream, for the request's `n` choices and its usage option."""
    n = compared.get("n") or meta.get("n") or 1
    return _Finished(int(n), wants_usage(meta))


def _at(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = document
    for key in path:
        value = mapping(value).get(key)
    return value


def reported_usage(document: Mapping[str, Any]) -> dict[str, Any] | None:
    """The usage object a completion or chunk carries: OpenAI's `usage`, else where a compatible
    provider puts it (`openai_compatible.USAGE_AT`); None when it carries none."""
    for path in USAGE_AT:
        found = _at(document, path)
        if found and isinstance(found, dict):
            return found
    return None


def usage(documents: Iterable[Any]) -> Usage:
    """The last usage reported; cached prompt tokens counted as cache reads, not input."""
    model: str | None = None
    inp = out = cache_read = 0
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        model = doc.get("model") or model
        found = reported_usage(doc)
        if found is not None:
            cached = next((c for path in CACHED_AT if (c := number(_at(found, path)))), 0)
            inp, cache_read = number(found.get("prompt_tokens")) - cached, cached
            out = number(found.get("completion_tokens"))
    return Usage(model, inp, out, cache_read)


def text(event: str, data: dict[str, Any]) -> Iterator[tuple[int, str]]:
    for choice in dicts(data.get("choices")):
        content = mapping(choice.get("delta")).get("content")
        if isinstance(content, str):
            yield index(choice.get("index")), content


RULES = ReplyRules(
    surface=surfaces.OPENAI_CHAT,
    usage=usage,
    # Message text and tool-call arguments (`choices[].text` some providers repeat is not).
    arrived=generated_bytes(frozenset({"content", "arguments"})),
    sse_end=end,
    text=text,
)
