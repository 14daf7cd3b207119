"""A streamed reply read back as the text it spelled out: one rule per provider surface.

Pure functions over the recorded body bytes; the SSE framing is `pyrula.transport.framing`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyrula.transport.framing import SSEDecoder, SSEEvent

# A rule reads one event's parsed JSON and yields (choice index, text piece) pairs.
Rule = Callable[[str, Any], Iterator[tuple[int, str]]]


def _openai_chat(event: str, data: Any) -> Iterator[tuple[int, str]]:
    for choice in _dicts(data.get("choices")):
        content = _dict(choice.get("delta")).get("content")
        if isinstance(content, str):
            yield _index(choice.get("index")), content


def _openai_responses(event: str, data: Any) -> Iterator[tuple[int, str]]:
    kind = data.get("type") or event
    if kind == "response.output_text.delta" and isinstance(data.get("delta"), str):
        yield 0, data["delta"]


def _anthropic(event: str, data: Any) -> Iterator[tuple[int, str]]:
    kind = data.get("type") or event
    delta = _dict(data.get("delta"))
    if kind == "content_block_delta" and delta.get("type") == "text_delta":
        text = delta.get("text")
        if isinstance(text, str):
            yield 0, text


def _gemini(event: str, data: Any) -> Iterator[tuple[int, str]]:
    for candidate in _dicts(data.get("candidates")):
        for part in _dicts(_dict(candidate.get("content")).get("parts")):
            text = part.get("text")
            if isinstance(text, str) and not part.get("thought"):
                yield _index(candidate.get("index")), text


# Surface (or surface family, ending in ".") -> its rule. First match wins.
RULES: tuple[tuple[str, Rule], ...] = (
    ("openai.chat", _openai_chat),
    ("openai.responses", _openai_responses),
    ("anthropic.", _anthropic),
    ("gemini.", _gemini),
)


def rule_for(surface: str) -> Rule | None:
    for name, rule in RULES:
        if surface == name or (name.endswith(".") and surface.startswith(name)):
            return rule
    return None


@dataclass(frozen=True, slots=True)
class Reassembled:
    """The events of a streamed reply and, when its surface has a rule, the text they carry."""

    events: list[SSEEvent]
    # choice (or candidate) index -> its text; empty when no rule applies or no text was sent.
    texts: dict[int, str] = field(default_factory=dict)

    @property
    def text(self) -> str | None:
        """All the text, choices one after another; None when there is none to show."""
        if not self.texts:
            return None
        if list(self.texts) == [0]:
            return self.texts[0]
        return "\n".join(f"[choice {i}]\n{text}" for i, text in sorted(self.texts.items()))


def sse_events(body: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    return [*decoder.feed(body), *decoder.close()]


def reassemble(surface: str, body: bytes) -> Reassembled:
    """Decode a server-sent-event body and join its text deltas by the surface's rule."""
    events = sse_events(body)
    rule = rule_for(surface)
    texts: dict[int, str] = {}
    if rule is not None:
        for event in events:
            data = _parse(event.data)
            if not isinstance(data, dict):
                continue
            for index, piece in rule(event.event, data):
                texts[index] = texts.get(index, "") + piece
    return Reassembled(events, texts)


def _parse(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None  # `[DONE]`, a keep-alive, or a malformed event: it carries no text


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict))


def _index(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
