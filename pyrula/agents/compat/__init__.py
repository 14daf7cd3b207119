"""Drop-in provider clients whose calls are journaled inside a run.

Each drop-in module imports its own SDK, so this package imports none of them until a name is
asked for: `from pyrula.agents.compat.openai import AsyncOpenAI` (or from this package) loads
openai only, never anthropic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrula.agents.compat._registry import converter_home, journaled, provider_home
from pyrula.lazy import import_extra

if TYPE_CHECKING:  # what IDEs and type checkers see; at run time each loads on first use
    from pyrula.agents.compat import bedrock, genai
    from pyrula.agents.compat.anthropic import (
        Anthropic,
        AnthropicBedrock,
        AnthropicVertex,
        AsyncAnthropic,
        AsyncAnthropicBedrock,
        AsyncAnthropicVertex,
    )
    from pyrula.agents.compat.openai import (
        AsyncAzureOpenAI,
        AsyncBedrockOpenAI,
        AsyncOpenAI,
        AzureOpenAI,
        BedrockOpenAI,
        OpenAI,
    )

_OPENAI = "pyrula.agents.compat.openai"
_ANTHROPIC = "pyrula.agents.compat.anthropic"
# Name -> (drop-in module, the extra that brings its SDK).
_LAZY: dict[str, tuple[str, str]] = {
    **{
        name: (_OPENAI, "agents")
        for name in (
            "OpenAI",
            "AsyncOpenAI",
            "AzureOpenAI",
            "AsyncAzureOpenAI",
            "BedrockOpenAI",
            "AsyncBedrockOpenAI",
        )
    },
    **{
        name: (_ANTHROPIC, "agents")
        for name in (
            "Anthropic",
            "AsyncAnthropic",
            "AnthropicBedrock",
            "AsyncAnthropicBedrock",
            "AnthropicVertex",
            "AsyncAnthropicVertex",
        )
    },
}
_MODULES = {"genai": "gemini", "bedrock": "bedrock", "openai": "agents", "anthropic": "agents"}

# `journaled(client)` imports the drop-in for the client's SDK the first time it meets one.
provider_home("openai", _OPENAI)
provider_home("anthropic", _ANTHROPIC)
converter_home("botocore.client", "pyrula.agents.compat.bedrock")
converter_home("google.genai", "pyrula.agents.compat.genai")

__all__ = [
    "Anthropic",
    "AnthropicBedrock",
    "AnthropicVertex",
    "AsyncAnthropic",
    "AsyncAnthropicBedrock",
    "AsyncAnthropicVertex",
    "AsyncAzureOpenAI",
    "AsyncBedrockOpenAI",
    "AsyncOpenAI",
    "AzureOpenAI",
    "BedrockOpenAI",
    "OpenAI",
    "bedrock",
    "genai",
    "journaled",
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        extra = _MODULES[name]
        if extra != "agents":
            extra = f"agents,{extra}"
        return import_extra(f"{__name__}.{name}", extra)
    if name in _LAZY:
        module, extra = _LAZY[name]
        # An ImportError naming the release when the SDK lacks the client (BedrockOpenAI).
        return getattr(import_extra(module, extra, name), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
