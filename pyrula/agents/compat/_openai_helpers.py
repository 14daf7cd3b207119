"""What the OpenAI SDK's helpers must still do for the drop-in to journal them, checked before a
helper runs in a run.

A helper (`parse`, `stream`) is the SDK's own code sending through the journal transport, and
the drop-in leans on two of its internals:

- a stream helper's manager holds its request unsent (`api_request`) until it is entered, and
  the drop-in frames the entering as the one journaled call (`_frames`);
- a parse helper parses in the request's `post_parser`, so the SDK's parser runs on whatever
  reply the transport hands back, a replayed one included.

A release that moves either one would journal the helper wrongly, so in a run the helper is
refused instead, naming the installed openai and what moved (outside a run the guard never
asks, and the SDK's own helper runs). The table is data: one row per helper.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

import openai


@dataclass(frozen=True, slots=True)
class Internal:
    """A name in an SDK module that must exist and take `parameter`."""

    module: str
    name: str
    parameter: str

    def moved(self) -> bool:
        try:
            found = getattr(importlib.import_module(self.module), self.name)
        except (ImportError, AttributeError):
            return True
        key = (found, self.parameter)
        takes = _TAKES.get(key)
        if takes is None:  # read once per object: a signature costs tens of microseconds
            try:
                takes = self.parameter in inspect.signature(found).parameters  # a class: __init__
            except (TypeError, ValueError):
                takes = False
            _TAKES[key] = takes
        return not takes


# Whether an SDK object (as found now) takes a parameter, by the object itself.
_TAKES: dict[tuple[object, str], bool] = {}


_CHAT_STREAM = "openai.lib.streaming.chat"
_RESPONSES_STREAM = "openai.lib.streaming.responses"
_PARSED = Internal("openai._base_client", "make_request_options", "post_parser")

NEEDS: dict[str, tuple[Internal, ...]] = {
    "chat.completions.stream": (
        Internal(_CHAT_STREAM, "ChatCompletionStreamManager", "api_request"),
        Internal(_CHAT_STREAM, "AsyncChatCompletionStreamManager", "api_request"),
    ),
    "responses.stream": (
        Internal(_RESPONSES_STREAM, "ResponseStreamManager", "api_request"),
        Internal(_RESPONSES_STREAM, "AsyncResponseStreamManager", "api_request"),
    ),
    "chat.completions.parse": (_PARSED,),
    "responses.parse": (_PARSED,),
}


def moved_internal(path: str) -> str | None:
    """Why the helper at `path` cannot be journaled on the installed openai, else None."""
    for need in NEEDS.get(path, ()):
        if need.moved():
            create = path.rsplit(".", 1)[0] + ".create"
            return (
                f"`{path}` cannot be journaled in a run on openai {openai.__version__}: the "
                f"drop-in needs `{need.module}.{need.name}` taking `{need.parameter}`, which this "
                f"release moved. Call `{create}(...)` instead (journaled), or pin an openai "
                "release this pyrula supports until the drop-in is updated"
            )
    return None
