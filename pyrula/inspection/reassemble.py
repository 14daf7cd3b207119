"""A streamed reply read back as the text it spelled out, by its surface's text rule.

Pure functions over the recorded body bytes; the SSE framing is `pyrula.transport.framing`'s,
the text rule of each provider surface is in `pyrula.replies`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyrula.replies import rules_for
from pyrula.transport.framing import SSEDecoder, SSEEvent


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
    rule = rules_for(surface).text
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
