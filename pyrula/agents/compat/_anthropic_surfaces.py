"""The Anthropic drop-in's surface table: what a run journals, passes through or refuses.

Read it against the spec's Anthropic section row by row (see `_surfaces` for how a path is
looked up). The cloud clients (Bedrock, Vertex) expose a subset of these paths; the rows hold.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

from pyrula.agents.compat._surfaces import (
    J,
    P,
    R,
    RefusedArgument,
    Surface,
    SurfaceTable,
    any_value,
)

_IN_A_UNIT = "call it inside `ctx.step` or a `@tool`, whose result is journaled"
_USE_CREATE = "use `messages.create(...)` or its `stream` / `parse` helpers instead"
_RAW = ("with_raw_response", "with_streaming_response")
_GENERATION = ("messages", "beta.messages")

SURFACES: tuple[Surface, ...] = (
    # -- journaled: generation, the SDK helpers built on it, and writes replayed as recorded ---
    *(Surface(f"{base}.{verb}", J) for base in _GENERATION for verb in ("create", "stream")),
    # `parse` came with structured outputs: on the beta resource first.
    Surface("messages.parse", J, since="0.77.0"),
    Surface("beta.messages.parse", J, since="0.73.0"),
    Surface("messages.batches.create", J),
    Surface("beta.messages.batches.create", J),
    Surface("beta.dreams.create", J),
    # -- passed through unjournaled: reads, counts and configuration --------------------------
    Surface("messages.count_tokens", P),
    Surface("beta.messages.count_tokens", P),
    Surface("messages.batches", P),
    Surface("beta.messages.batches", P),
    Surface("beta.dreams", P),
    Surface("models", P),
    Surface("files", P),
    Surface("beta.agents", P),
    # -- refused: each would call the provider live again on every replay ---------------------
    Surface("completions", R, "the legacy text completions API; use `messages.create`"),
    Surface(
        "beta.messages.thread",
        R,
        "the helper drives several requests; call `beta.messages.create` (its `thread=` "
        "argument is journaled) in your own loop",
    ),
    Surface(
        "beta.messages.tool_runner",
        R,
        "it sends every turn outside the journal; loop over `messages.create` and run tools "
        "as `@tool`s",
    ),
    Surface("beta.sessions", R, _IN_A_UNIT),
    Surface("beta.deployments", R, _IN_A_UNIT),
    Surface("beta.deployment_runs", R, _IN_A_UNIT),
    *(Surface(raw, R, _USE_CREATE) for raw in _RAW),
    *(Surface(f"{base}.{raw}", R, _USE_CREATE) for base in ("beta", *_GENERATION) for raw in _RAW),
    *(Surface(f"{base}.batches.{raw}", R, _USE_CREATE) for base in _GENERATION for raw in _RAW),
)

_UNCLASSIFIED = (
    "this anthropic release has it but the drop-in has not classified it yet; use `messages.create`"
)

# The verdict for a path no row covers, by its nearest listed parent ("" is the client).
UNLISTED: dict[str, Surface] = {
    "": Surface("", P),
    "beta": Surface("beta", P),
    "messages": Surface("messages", R, _UNCLASSIFIED),
    "beta.messages": Surface("beta.messages", R, _UNCLASSIFIED),
}

_TOOL_SURFACES = tuple(
    f"{base}.{verb}" for base in _GENERATION for verb in ("create", "stream", "parse")
)

_SERVER_ACTS = (
    "Anthropic's servers run it with side effects a replay cannot undo; call the model inside "
    "`ctx.step` or a `@tool` (the unit's result is journaled), or leave it out"
)


def _has_skills(container: Any) -> bool:
    skills = container.get("skills") if isinstance(container, dict) else None
    return bool(skills if skills is not None else getattr(container, "skills", None))


@functools.cache
def _plain_stream_takes_output_format() -> bool:
    from anthropic.resources.messages import Messages

    return "output_format" in inspect.signature(Messages.stream).parameters


def _beta_only_output_format(value: Any) -> bool:
    """Before anthropic 0.77 the plain `messages.stream` takes no `output_format` (0.73 to 0.76
    have it only on the beta manager): refused in a run with the fix, where outside one the SDK
    raises its own `TypeError`."""
    return not _plain_stream_takes_output_format()


_BETA_ONLY = (
    "this anthropic release's plain `messages.stream` takes no `output_format` (it has it, and "
    "`messages.parse`, from anthropic 0.77.0; `beta.messages.stream` and `beta.messages.parse` "
    "from 0.73.0): call the beta helper, or upgrade anthropic"
)

REFUSED_ARGUMENTS: tuple[RefusedArgument, ...] = (
    RefusedArgument(_TOOL_SURFACES, "mcp_servers", any_value, _SERVER_ACTS),
    RefusedArgument(_TOOL_SURFACES, "container", _has_skills, _SERVER_ACTS),
    RefusedArgument(("messages.stream",), "output_format", _beta_only_output_format, _BETA_ONLY),
)

# Tool types a run allows: custom tools, the read-only server tools, and the tools your own code
# executes (Anthropic only asks for them). A type is its family plus an optional date, exactly,
# so a lookalike (`memory_server_20250101`) is not mistaken for an allowed family.
ALLOWED_TOOL_FAMILIES: frozenset[str] = frozenset(
    {
        "custom",
        "web_search",
        "web_fetch",
        "tool_search_tool_regex",
        "tool_search_tool_bm25",
        "bash",
        "text_editor",
        "computer",
        "memory",
    }
)
_DATED = re.compile(r"^(?P<family>[a-z_]+?)(?:_\d{8})?$")


def _allowed_tool(kind: str | None, tool: Any) -> bool:
    if kind is None:
        return True  # a custom tool: name, description and input_schema, no type
    match = _DATED.match(kind)
    return match is not None and match["family"] in ALLOWED_TOOL_FAMILIES


ANTHROPIC = SurfaceTable(
    rows=SURFACES,
    unlisted=UNLISTED,
    refused_arguments=REFUSED_ARGUMENTS,
    tool_surfaces=_TOOL_SURFACES,
    tool_allowed=_allowed_tool,
    tool_fix=_SERVER_ACTS,
    sdk="anthropic",
)
