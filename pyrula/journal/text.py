"""Recorded bytes as text: a frame is `{"text": ...}` when it is UTF-8, else `{"base64": ...}`.

One rule for every text form of the journal: `pyrula journal export` lines and text cassettes.
"""

from __future__ import annotations

import base64
from typing import Any


def frame_json(frame: bytes) -> dict[str, str]:
    try:
        return {"text": frame.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(frame).decode("ascii")}


def frame_bytes(item: Any) -> bytes:
    if isinstance(item, dict) and len(item) == 1:
        if isinstance(item.get("text"), str):
            return str(item["text"]).encode("utf-8")
        if isinstance(item.get("base64"), str):
            return base64.b64decode(item["base64"], validate=True)
    raise ValueError('a frame must be {"text": ...} or {"base64": ...}')
