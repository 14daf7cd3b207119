"""Does a live reply still look like its recording? (cassette mode `verify`)

Values always differ between two model replies; what breaks a recorded suite is a change of
shape: a field that appeared or went away, a type that changed, a model alias now answered by
another model, a status that moved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyrula.replies import generic, rules_for
from pyrula.transport.framing import reply_documents

_TYPE_NAMES = {bool: "bool", int: "number", float: "number", str: "string", type(None): "null"}


def _shape(value: Any, path: str, into: set[str]) -> None:
    if isinstance(value, dict):
        into.add(f"{path or '$'}:object")
        for key, item in value.items():
            _shape(item, f"{path}.{key}" if path else key, into)
    elif isinstance(value, list):
        into.add(f"{path or '$'}:array")
        for item in value:
            _shape(item, f"{path}[]", into)
    else:
        into.add(f"{path or '$'}:{_TYPE_NAMES.get(type(value), 'value')}")


def reply_shape(
    body: bytes,
    model_fields: tuple[str, ...] = generic.RULES.model_fields,
    *,
    streamed: bool | None = None,
) -> tuple[set[str], set[str]]:
    """The set of `path:type` entries of a reply, and the models it names (in `model_fields`,
    which the surface's reply rules give).

    A stream is read as the structure it reassembles to: the union of its events' documents,
    each under its event type (`<content_block_delta>.delta.text:string`), so how the provider
    chunked it, how many keep-alive pings it sent and whether a terminal `[DONE]` arrived do not
    change the shape. `streamed=None` guesses from the bytes (a plain body is one JSON document).
    """
    if streamed is None:
        streamed = not _is_json(body)
    shape: set[str] = set()
    models: set[str] = set()
    for document in reply_documents(body, streamed):
        if _keep_alive(document):
            continue
        kind = document.get("type") if isinstance(document, dict) else None
        prefix = f"<{kind}>" if streamed and isinstance(kind, str) else ""
        _shape(document, prefix, shape)
        _models(document, model_fields, models)
    if not streamed and not shape:
        shape.add("$:not-json")
    return shape, models


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return False
    return True


def _keep_alive(document: Any) -> bool:
    """A keep-alive the provider sends at will (Anthropic's `ping`): no part of the structure."""
    return isinstance(document, dict) and document.get("type") == "ping" and len(document) == 1


def _models(value: Any, fields: tuple[str, ...], into: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in fields and isinstance(item, str):
                into.add(item)
            else:
                _models(item, fields, into)
    elif isinstance(value, list):
        for item in value:
            _models(item, fields, into)


@dataclass
class VerifyResult:
    surface: str
    recorded_status: int
    live_status: int
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    recorded_models: list[str] = field(default_factory=list)
    live_models: list[str] = field(default_factory=list)
    record_id: str = ""

    @property
    def matches(self) -> bool:
        return (
            self.recorded_status == self.live_status
            and not self.added
            and not self.removed
            and self.recorded_models == self.live_models
        )

    def describe(self) -> str:
        if self.matches:
            return f"{self.record_id[:12]} {self.surface}: matches"
        notes = []
        if self.recorded_status != self.live_status:
            notes.append(f"status {self.recorded_status} -> {self.live_status}")
        if self.recorded_models != self.live_models:
            notes.append(f"model {self.recorded_models} -> {self.live_models}")
        notes += [f"new field {p}" for p in self.added[:10]]
        notes += [f"missing field {p}" for p in self.removed[:10]]
        return f"{self.record_id[:12]} {self.surface}: " + "; ".join(notes)


def compare_replies(
    surface: str,
    recorded_status: int,
    recorded: bytes,
    live_status: int,
    live: bytes,
    *,
    streamed: bool | None = None,
) -> VerifyResult:
    """One call's verdict: its recorded reply against the live one, by status, structure and
    the models they name. `streamed` says whether both are streams (None: guess per body)."""
    fields = rules_for(surface).model_fields
    old_shape, old_models = reply_shape(recorded, fields, streamed=streamed)
    new_shape, new_models = reply_shape(live, fields, streamed=streamed)
    return VerifyResult(
        surface=surface,
        recorded_status=recorded_status,
        live_status=live_status,
        added=sorted(new_shape - old_shape),
        removed=sorted(old_shape - new_shape),
        recorded_models=sorted(old_models),
        live_models=sorted(new_models),
    )
