"""OpenAI-compatible providers' replies: OpenAI chat's wire format, and the few places where a
provider reports usage its own way.

One row per provider named in `pyrula.fingerprints.openai_compatible`. A provider whose replies
are OpenAI's exactly still has a row, so this table lists every provider whose replies were
checked. `openai_chat` reads every row's extra places, so a reply is metered right whichever
host served it (a proxy, a gateway, a renamed local server).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyrula.fingerprints import openai_compatible as providers


@dataclass(frozen=True, slots=True)
class Dialect:
    """Where one provider's chat replies differ from OpenAI's."""

    provider: str
    # Where a chunk carries its usage when it is not in the top-level `usage` (a key path).
    usage_at: tuple[str, ...] = ()
    # Where usage counts cached prompt tokens when not in `prompt_tokens_details.cached_tokens`.
    cached_at: tuple[str, ...] = ()


DIALECTS: tuple[Dialect, ...] = (
    Dialect(providers.MISTRAL),
    # Groq's streams report usage in `x_groq.usage` on the last chunk.
    Dialect(providers.GROQ, usage_at=("x_groq", "usage")),
    Dialect(providers.XAI),
    # DeepSeek counts its context-cache hits as `prompt_cache_hit_tokens` (part of prompt_tokens).
    Dialect(providers.DEEPSEEK, cached_at=("prompt_cache_hit_tokens",)),
    # OpenRouter adds `cost`, `provider` and `: OPENROUTER PROCESSING` comments; usage is OpenAI's.
    Dialect(providers.OPENROUTER),
    # Together repeats each chunk's text as `choices[].text`: counted once, as `delta.content`.
    Dialect(providers.TOGETHER),
    Dialect(providers.OLLAMA),
    Dialect(providers.VLLM),
)

# OpenAI's own places first: a provider's extra place is read only when OpenAI's is empty.
USAGE_AT: tuple[tuple[str, ...], ...] = (
    ("usage",),
    *(dialect.usage_at for dialect in DIALECTS if dialect.usage_at),
)
CACHED_AT: tuple[tuple[str, ...], ...] = (
    ("prompt_tokens_details", "cached_tokens"),
    *(dialect.cached_at for dialect in DIALECTS if dialect.cached_at),
)
