"""The Gemini drop-in's surface table: what a run journals, passes through or refuses.

Read it against the spec's Gemini section row by row (see `_surfaces` for how a path is looked
up). Every row holds on the sync client and on `client.aio`; `chats` is not a row, since a chat
sends each turn through `models`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pyrula.agents.compat._surfaces import J, P, R, Surface, SurfaceTable

_USE_GENERATE = "use `models.generate_content` with a Gemini image or video model"
_IN_A_UNIT = "or call it inside `ctx.step` or a `@tool`, whose result is journaled"
_NEXTGEN = (
    "its calls go out through another client the journal does not see; use "
    f"`models.generate_content` (or a `chats` turn), {_IN_A_UNIT}"
)
_SIDES = ("", "aio.")

_MEDIA = (
    "generate_images",
    "edit_image",
    "upscale_image",
    "generate_videos",
    "recontext_image",
    "segment_image",
)
# `models` methods that are not generation: counts, embeddings and model metadata.
_MODEL_READS = (
    "embed_content",
    "count_tokens",
    "compute_tokens",
    "get",
    "list",
    "update",
    "delete",
)


def _both(rows: Iterable[Surface]) -> tuple[Surface, ...]:
    return tuple(
        Surface(f"{side}{row.path}", row.verdict, row.fix, row.since)
        for side in _SIDES
        for row in rows
    )


_LIVE = Surface(
    "aio.live",
    R,
    "a live session streams both ways over a websocket the journal does not see; use "
    f"`models.generate_content_stream`, {_IN_A_UNIT}",
)
SURFACES: tuple[Surface, ...] = (
    *_both(
        (
            # -- journaled: generation, and the writes a replay answers with the recorded job ----
            Surface("models.generate_content", J),
            Surface("models.generate_content_stream", J),
            Surface("batches.create", J),
            Surface("batches.create_embeddings", J),
            Surface("tunings.tune", J),
            # -- passed through unjournaled: reads, counts, embeddings, stores, cancels -----------
            *(Surface(f"models.{name}", P) for name in _MODEL_READS),
            Surface("batches", P),
            Surface("tunings", P),
            Surface("caches", P),
            Surface("files", P),
            Surface("file_search_stores", P),
            Surface("operations", P),
            Surface("auth_tokens", P),
            # -- refused: each would call the provider live again on every replay ---------------
            *(Surface(f"models.{name}", R, f"{_USE_GENERATE}, {_IN_A_UNIT}") for name in _MEDIA),
            # Released after the 1.46 floor (the first release that has each).
            Surface("interactions", R, _NEXTGEN, since="1.55.0"),
            Surface("agents", R, _NEXTGEN, since="2.4.0"),
            Surface("triggers", R, _NEXTGEN, since="2.12.0"),
        )
    ),
    _LIVE,
)

_UNCLASSIFIED = (
    "this google-genai release has it but the drop-in has not classified it yet; use "
    "`models.generate_content`"
)

# The verdict for a path no row covers, by its nearest listed parent ("" is the client).
UNLISTED: dict[str, Surface] = {
    "": Surface("", P),
    "aio": Surface("aio", P),
    "models": Surface("models", R, _UNCLASSIFIED),
    "aio.models": Surface("aio.models", R, _UNCLASSIFIED),
}

GENERATION: frozenset[str] = frozenset(
    f"{side}models.{verb}"
    for side in _SIDES
    for verb in ("generate_content", "generate_content_stream")
)

# -- `config.tools` ------------------------------------------------------------------------------

# `Tool` fields a run allows: your own declarations, `computer_use` (your code performs the
# actions), and the server tools that only read. Anything else acts on a server, or is new.
ALLOWED_TOOL_FIELDS: frozenset[str] = frozenset(
    {
        "function_declarations",
        "computer_use",
        "google_search",
        "google_search_retrieval",
        "google_maps",
        "url_context",
        "file_search",
        "retrieval",
        "enterprise_web_search",
        "exa_ai_search",
        "parallel_ai_search",
    }
)

SERVER_ACTS = (
    "Google's servers run it with effects a replay cannot undo or repeat; declare a function "
    "and run it yourself in `ctx.step` or a `@tool`, or leave it out"
)
RUNS_YOUR_FUNCTION = (
    "with automatic function calling on, the SDK runs it and asks the model again inside one "
    'call, which a replay cannot skip; set `automatic_function_calling={"disable": True}` and '
    "run the calls yourself in `ctx.step` or a `@tool`"
)

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _get(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        camel = re.sub(r"_(\w)", lambda m: m[1].upper(), name)
        return value.get(name, value.get(camel))
    return getattr(value, name, None)


def afc_disabled(config: Any) -> bool:
    """Whether the SDK will not run Python tools itself (the SDK's own rule)."""
    afc = _get(config, "automatic_function_calling")
    if afc is None:
        return False
    maximum = _get(afc, "maximum_remote_calls")
    if maximum is not None and int(maximum) <= 0:
        return True
    return _get(afc, "disable") is True


def _is_mcp_session(tool: Any) -> bool:
    return any(
        k.__name__ == "ClientSession" and k.__module__.startswith("mcp") for k in type(tool).__mro__
    )


def _tool_fields(tool: Any) -> list[str]:
    """The set fields of a `Tool` (a model or its dict, in either spelling), snake_case."""
    if isinstance(tool, dict):
        fields = [k for k, v in tool.items() if v is not None]
    else:
        dump = getattr(tool, "model_dump", None)
        fields = list(dump(exclude_none=True)) if callable(dump) else [type(tool).__name__]
    return [_CAMEL.sub("_", f).lower() for f in fields]


def afc_refusal(config: Any) -> str | None:
    """Why `config.tools` makes the SDK run functions itself (automatic function calling on
    with a Python function or MCP session among the tools), else None. Refused even inside a
    step or tool: one call would hide several model requests behind one cap check."""
    if config is None or afc_disabled(config):
        return None
    for tool in _get(config, "tools") or ():
        if callable(tool) or _is_mcp_session(tool):
            kind = "an MCP session" if _is_mcp_session(tool) else "a Python function"
            return f"{kind} in `config.tools`: {RUNS_YOUR_FUNCTION}"
    return None


def tools_refusal(config: Any) -> str | None:
    """Why `config.tools` cannot run in a run, else None."""
    refusal = afc_refusal(config)
    if refusal is not None:
        return refusal
    tools = _get(config, "tools") if config is not None else None
    for tool in tools or ():
        if callable(tool) or _is_mcp_session(tool):
            continue  # only declared: the model asks, your code answers
        for field in _tool_fields(tool):
            if field not in ALLOWED_TOOL_FIELDS:
                return f"a `{field}` tool in `config.tools`: {SERVER_ACTS}"
    return None


GENAI = SurfaceTable(rows=SURFACES, unlisted=UNLISTED, sdk="google-genai")
