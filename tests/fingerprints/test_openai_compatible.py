"""OpenAI-compatible providers: told apart by host (or a local server's port), fingerprinted as
OpenAI chat and responses with the provider's name kept in meta, never compared."""

from __future__ import annotations

import json

import pytest
from pyrula.fingerprints import RequestParts, canonicalize, provider_of, surfaces


@pytest.mark.parametrize(
    ("url", "provider"),
    [
        ("https://api.mistral.ai/v1/chat/completions", "mistral"),
        ("https://api.groq.com/openai/v1/chat/completions", "groq"),
        ("https://api.x.ai/v1/responses", "xai"),
        ("https://api.deepseek.com/chat/completions", "deepseek"),
        ("https://openrouter.ai/api/v1/chat/completions", "openrouter"),
        ("https://api.together.xyz/v1/chat/completions", "together"),
        ("http://localhost:11434/v1/chat/completions", "ollama"),
        ("http://127.0.0.1:8000/v1/chat/completions", "vllm"),
        ("http://[::1]:11434/v1/chat/completions", "ollama"),
        ("https://API.GROQ.COM/openai/v1/chat/completions", "groq"),
        ("https://api.openai.com/v1/chat/completions", None),
        ("https://res.openai.azure.com/openai/deployments/d/chat/completions", None),
        ("http://gpu-box:8000/v1/chat/completions", None),  # 8000 says vLLM only locally
        ("http://127.0.0.1:41234/v1/chat/completions", None),
        ("not a url", None),
    ],
)
def test_a_provider_is_known_by_its_host_or_local_port(url, provider):
    assert provider_of(url) == provider


def _parts(url: str, body: dict[str, object]) -> RequestParts:
    return RequestParts("POST", url, {}, json.dumps(body).encode())


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_chat_on_a_compatible_host_is_openai_chat_with_the_same_digest():
    openai_call = canonicalize(_parts("https://api.openai.com/v1/chat/completions", CHAT))
    mistral_call = canonicalize(_parts("https://api.mistral.ai/v1/chat/completions", CHAT))
    assert mistral_call.surface == openai_call.surface == surfaces.OPENAI_CHAT
    assert mistral_call.digest == openai_call.digest
    assert mistral_call.meta == {**openai_call.meta, "provider": "mistral"}


def test_responses_on_a_compatible_host_name_the_provider_too():
    body = {"model": "grok-4", "input": "hi"}
    call = canonicalize(_parts("https://api.x.ai/v1/responses", body))
    assert (call.surface, call.meta["provider"]) == (surfaces.OPENAI_RESPONSES, "xai")
