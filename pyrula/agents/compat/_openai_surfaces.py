"""The OpenAI drop-in's surface table: what a run journals, passes through or refuses.

Read it against the spec's table row by row (see `_surfaces` for how a path is looked up).
"""

from __future__ import annotations

from typing import Any

from pyrula.agents.compat._surfaces import (
    J,
    P,
    R,
    RefusedArgument,
    Surface,
    SurfaceTable,
    any_value,
    is_true,
)

_USE_CREATE = "use `create(...)` or its `parse` / `stream` helpers instead"


SURFACES: tuple[Surface, ...] = (
    # -- journaled: the generation calls and the SDK helpers built on them ---------------------
    Surface("chat.completions.create", J),
    Surface("chat.completions.parse", J),
    Surface("chat.completions.stream", J),
    Surface("responses.create", J),
    Surface("responses.parse", J),
    Surface("responses.stream", J),  # but see `response_id=` in REFUSED_ARGUMENTS
    # -- passed through unjournaled: non-generation surfaces ------------------------------------
    Surface("embeddings", P),
    Surface("files", P),
    Surface("models", P),
    Surface("responses.delete", P),
    Surface("responses.input_items", P),
    Surface("responses.input_tokens", P, since="2.6.0"),
    Surface("beta.assistants", P),
    # stored chat completions: reads and metadata edits, nothing is generated
    Surface("chat.completions.list", P),
    Surface("chat.completions.retrieve", P),
    Surface("chat.completions.update", P),
    Surface("chat.completions.delete", P),
    Surface("chat.completions.messages", P),
    # -- refused: each would call the provider live again on every replay ---------------------
    Surface("completions", R, "use `chat.completions.create` or `responses.create`"),
    Surface("audio", R, "call it inside `ctx.step` or a `@tool`, whose result is journaled"),
    Surface("images", R, "call it inside `ctx.step` or a `@tool`, whose result is journaled"),
    Surface("videos", R, "call it inside `ctx.step` or a `@tool`, whose result is journaled"),
    Surface("realtime", R, "use `chat.completions.create` or `responses.create`"),
    Surface("beta.chat", R, "`beta.chat.completions.parse` is `chat.completions.parse`"),
    Surface("beta.realtime", R, "use `chat.completions.create` or `responses.create`"),
    Surface("beta.threads", R, "use `responses.create` (chain with `previous_response_id`)"),
    Surface("responses.retrieve", R, "keep the `Response` that `responses.create` returned"),
    Surface("responses.cancel", R, "do not start background responses inside a run"),
    Surface("responses.compact", R, "send the input you want with `responses.create`", "2.9.0"),
    Surface("responses.connect", R, "use `responses.create(stream=True)`", "2.22.0"),
    Surface("with_raw_response", R, _USE_CREATE),
    Surface("with_streaming_response", R, _USE_CREATE),
    Surface("chat.with_raw_response", R, _USE_CREATE),
    Surface("chat.with_streaming_response", R, _USE_CREATE),
    Surface("chat.completions.with_raw_response", R, _USE_CREATE),
    Surface("chat.completions.with_streaming_response", R, _USE_CREATE),
    Surface("responses.with_raw_response", R, _USE_CREATE),
    Surface("responses.with_streaming_response", R, _USE_CREATE),
    Surface("beta.with_raw_response", R, _USE_CREATE),
    Surface("beta.with_streaming_response", R, _USE_CREATE),
)

_UNCLASSIFIED = (
    "this openai release has it but the drop-in has not classified it yet; use "
    "`chat.completions.create` or `responses.create`"
)

# The verdict for a path no row covers, by its nearest listed parent ("" is the client).
UNLISTED: dict[str, Surface] = {
    "": Surface("", P),
    "beta": Surface("beta", P),
    "chat": Surface("chat", R, _UNCLASSIFIED),
    "chat.completions": Surface("chat.completions", R, _UNCLASSIFIED),
    "responses": Surface("responses", R, _UNCLASSIFIED),
}


_RESPONSES = ("responses.create", "responses.parse", "responses.stream")

REFUSED_ARGUMENTS: tuple[RefusedArgument, ...] = (
    RefusedArgument(
        _RESPONSES, "background", is_true, "run the call in the foreground (drop `background=True`)"
    ),
    RefusedArgument(
        _RESPONSES,
        "conversation",
        any_value,
        "a conversation is mutable server state; chain with `previous_response_id` or send the "
        "full `input`",
    ),
    RefusedArgument(
        ("responses.stream",),
        "response_id",
        any_value,
        "it re-reads stored server state; start the stream with `input=` instead",
    ),
    RefusedArgument(
        ("responses.stream",),
        "starting_after",
        any_value,
        "it re-reads stored server state; start the stream with `input=` instead",
    ),
)

# `tools=` on these surfaces: types OpenAI's servers do not run with side effects.
TOOL_SURFACES: tuple[str, ...] = _RESPONSES
ALLOWED_TOOL_TYPES: frozenset[str] = frozenset(
    {
        "function",
        "custom",
        "computer",
        "local_shell",
        "apply_patch",
        "shell",
        "file_search",
        "tool_search",
    }
)
ALLOWED_TOOL_PREFIXES: tuple[str, ...] = ("web_search",)
# A `shell` tool is allowed only without an environment or with one of these types.
LOCAL_SHELL_ENVIRONMENTS: frozenset[str] = frozenset({"local"})
TOOL_FIX = (
    "OpenAI's servers run it with side effects a replay cannot undo; call the model inside "
    "`ctx.step` or a `@tool` (the unit's result is journaled), or leave the tool out"
)


def _allowed_tool(kind: str | None, tool: Any) -> bool:
    if kind is None:
        return False
    if kind.startswith(ALLOWED_TOOL_PREFIXES):
        return True
    if kind not in ALLOWED_TOOL_TYPES:
        return False
    if kind != "shell":
        return True
    environment = tool.get("environment") if isinstance(tool, dict) else None
    if not environment:
        return True
    env_type = environment.get("type") if isinstance(environment, dict) else None
    return env_type in LOCAL_SHELL_ENVIRONMENTS


OPENAI = SurfaceTable(
    rows=SURFACES,
    unlisted=UNLISTED,
    refused_arguments=REFUSED_ARGUMENTS,
    tool_surfaces=TOOL_SURFACES,
    tool_allowed=_allowed_tool,
    tool_fix=TOOL_FIX,
    sdk="openai",
)
