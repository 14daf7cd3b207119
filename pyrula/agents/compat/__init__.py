"""Drop-in provider clients whose calls are journaled inside a run."""

from __future__ import annotations

import importlib
from typing import Any

from pyrula.agents.compat import openai as _openai
from pyrula.agents.compat._registry import converter_home, journaled
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
    AsyncOpenAI,
    AzureOpenAI,
    OpenAI,
)

# boto3 and google-genai clients are journaled by their own drop-ins, imported on first use.
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
    "genai",
    "journaled",
]


def __getattr__(name: str) -> Any:
    if name == "genai":  # imported when asked for: it needs google-genai
        try:
            return importlib.import_module("pyrula.agents.compat.genai")
        except ImportError as exc:
            raise ImportError(
                f"the Gemini drop-in needs google-genai ({exc}); install it with "
                '`pip install "pyrula[agents,gemini]"`'
            ) from exc
    if name in ("BedrockOpenAI", "AsyncBedrockOpenAI"):
        return getattr(_openai, name)  # an ImportError naming the release when openai lacks it
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
