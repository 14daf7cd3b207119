"""The OpenAI drop-in: the SDK's own client classes, sending through Pyrula's journal transport.

Each class is a subclass of the SDK's, with its resources routed through the OpenAI surface
table (`_openai_surfaces`); the machinery is shared with the other drop-ins (`_stainless`,
`_guard`, `_frames`).
"""

from __future__ import annotations

from typing import Any

import openai
from openai.lib.azure import BaseAzureClient

from pyrula.agents.compat._openai_helpers import moved_internal
from pyrula.agents.compat._openai_surfaces import OPENAI
from pyrula.agents.compat._registry import journaled, register
from pyrula.agents.compat._stainless import Provider, drop_in
from pyrula.runtime.calls import current_run

__all__ = [
    "AsyncAzureOpenAI",
    "AsyncOpenAI",
    "AzureOpenAI",
    "OpenAI",
    "journaled",
]

_STREAMED_CHAT = ("chat.completions.create", "chat.completions.stream")


def _is_azure(client: Any) -> bool:
    return isinstance(client, BaseAzureClient)


def _with_usage(client: Any, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Inside an `@agent`, and on an Azure client in any run (a `@workflow`, a step), a streamed
    chat call asks for the usage chunk, so the meter sees it (the transport then journals the
    stream once that chunk has arrived). A caller's own `include_usage` is kept."""
    if path not in _STREAMED_CHAT or not (current_run().is_agent or _is_azure(client)):
        return kwargs
    if path.endswith(".create") and kwargs.get("stream") is not True:
        return kwargs
    options = kwargs.get("stream_options")
    options = dict(options) if PROVIDER.given(options) and isinstance(options, dict) else {}
    if options.get("include_usage") is not None:
        return kwargs  # the caller chose
    return {**kwargs, "stream_options": {**options, "include_usage": True}}


PROVIDER = Provider(
    sdk=openai,
    table=OPENAI,
    instructor_call=("chat", "completions", "create"),
    instructor_order="`instructor.from_openai(journaled(client))`",
    prepare=_with_usage,
    model_alias=_is_azure,
    moved_internal=moved_internal,
)


@drop_in(PROVIDER)
class OpenAI(openai.OpenAI):
    """`openai.OpenAI`, journaled inside a run (the sync twin: call it on a thread of the run)."""


@drop_in(PROVIDER)
class AsyncOpenAI(openai.AsyncOpenAI):
    """`openai.AsyncOpenAI`, journaled inside a run."""


@drop_in(PROVIDER)
class AzureOpenAI(openai.AzureOpenAI):
    """`openai.AzureOpenAI`, journaled inside a run."""


@drop_in(PROVIDER)
class AsyncAzureOpenAI(openai.AsyncAzureOpenAI):
    """`openai.AsyncAzureOpenAI`, journaled inside a run."""


_DROP_INS: list[tuple[type, type]] = [
    (openai.AsyncAzureOpenAI, AsyncAzureOpenAI),
    (openai.AzureOpenAI, AzureOpenAI),
    (openai.AsyncOpenAI, AsyncOpenAI),
    (openai.OpenAI, OpenAI),
]

if hasattr(openai, "BedrockOpenAI"):

    @drop_in(PROVIDER)
    class BedrockOpenAI(openai.BedrockOpenAI):
        """`openai.BedrockOpenAI`, journaled inside a run."""

    @drop_in(PROVIDER)
    class AsyncBedrockOpenAI(openai.AsyncBedrockOpenAI):
        """`openai.AsyncBedrockOpenAI`, journaled inside a run."""

    _DROP_INS[:0] = [
        (openai.AsyncBedrockOpenAI, AsyncBedrockOpenAI),
        (openai.BedrockOpenAI, BedrockOpenAI),
    ]
    __all__ += ["AsyncBedrockOpenAI", "BedrockOpenAI"]

register(PROVIDER, _DROP_INS)

_BEDROCK = ("BedrockOpenAI", "AsyncBedrockOpenAI")


def __getattr__(name: str) -> Any:
    if name in _BEDROCK:
        raise ImportError(
            f"{name} needs an openai release that ships it; the installed openai "
            f"{openai.__version__} does not. Upgrade openai, or test "
            '`hasattr(openai, "BedrockOpenAI")` before importing it'
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
