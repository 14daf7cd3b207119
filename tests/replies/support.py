"""Recorded-shape replies of the OpenAI-compatible providers, as each really sends them.

Bodies and SSE streams keep every provider's own extra fields (Groq's `x_groq`, DeepSeek's
`prompt_cache_hit_tokens`, OpenRouter's `provider`, `cost` and processing comments, Together's
repeated `text`, vLLM's `stop_reason`, Ollama's `fp_ollama`), so a test that replays them through
the real OpenAI SDK sees what a user would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ASK = [{"role": "user", "content": "Name a sea snail."}]
ANSWER = ["The ", "pyrula ", "fig ", "shell."]


@dataclass(frozen=True)
class Compatible:
    """One OpenAI-compatible provider as a user points the OpenAI SDK at it."""

    name: str
    base_url: str  # what the user passes as `base_url`
    model: str
    # The usage its replies report: (input, output, cache read), as Pyrula meters it.
    usage: tuple[int, int, int]
    streamed_usage: tuple[int, int, int]
    proxy_suffix: str = "/v1"  # appended to the proxy's /<name> to make the SDK's base URL


PROVIDERS = (
    Compatible(
        "mistral", "https://api.mistral.ai/v1", "mistral-small-latest", (9, 7, 0), (9, 4, 0)
    ),
    Compatible(
        "groq", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile", (41, 8, 0), (41, 4, 0)
    ),
    Compatible("xai", "https://api.x.ai/v1", "grok-4", (20, 9, 12), (20, 4, 12)),
    Compatible(
        "deepseek", "https://api.deepseek.com", "deepseek-chat", (12, 6, 64), (12, 4, 64), ""
    ),
    Compatible(
        "openrouter", "https://openrouter.ai/api/v1", "openai/gpt-4o-mini", (14, 7, 0), (14, 4, 0)
    ),
    Compatible(
        "together",
        "https://api.together.xyz/v1",
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        (45, 6, 0),
        (45, 4, 0),
    ),
    Compatible("ollama", "http://localhost:11434/v1", "llama3.2", (31, 9, 0), (31, 4, 0)),
    Compatible(
        "vllm", "http://localhost:8000/v1", "Qwen/Qwen2.5-7B-Instruct", (25, 8, 0), (25, 4, 0)
    ),
)


def _usage(name: str, streamed: bool) -> dict[str, Any]:
    """Each provider's usage object; output is the number of stream pieces when streamed."""
    out = len(ANSWER) if streamed else {p.name: p.usage for p in PROVIDERS}[name][1]
    inp, _, cached = {p.name: p.usage for p in PROVIDERS}[name]
    prompt = inp + cached
    base = {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}
    if name == "groq":
        return {
            "queue_time": 0.0172,
            **base,
            "prompt_time": 0.0021,
            "completion_time": 0.0133,
            "total_time": 0.0154,
        }
    if name == "xai":
        return {
            **base,
            "prompt_tokens_details": {
                "text_tokens": prompt,
                "audio_tokens": 0,
                "image_tokens": 0,
                "cached_tokens": cached,
            },
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
            "num_sources_used": 0,
        }
    if name == "deepseek":  # cache hits counted apart, no prompt_tokens_details
        return {**base, "prompt_cache_hit_tokens": cached, "prompt_cache_miss_tokens": inp}
    if name == "openrouter":
        return {
            **base,
            "cost": 0.00000633,
            "is_byok": False,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "cost_details": {"upstream_inference_cost": None},
            "completion_tokens_details": {"reasoning_tokens": 0, "image_tokens": 0},
        }
    if name == "together":
        return {**base, "cached_tokens": 0}
    if name == "vllm":
        return {**base, "prompt_tokens_details": None}
    return base


def _head(name: str, model: str, kind: str) -> dict[str, Any]:
    head: dict[str, Any] = {
        "id": {"openrouter": "gen-1764543210-Xq2", "together": "9a6f1c2e8d3b4a10"}.get(
            name, f"chatcmpl-{name}-1"
        ),
        "object": kind,
        "created": 1764543210,
        "model": model,
    }
    if name == "openrouter":
        head["provider"] = "OpenAI"
    if name in ("groq", "deepseek", "xai", "openrouter"):
        head["system_fingerprint"] = f"fp_{name}_3a2c"
    if name == "ollama":
        head["system_fingerprint"] = "fp_ollama"
    return head


def completion(provider: Compatible) -> dict[str, Any]:
    """A plain chat completion as `provider` returns it."""
    name = provider.name
    message: dict[str, Any] = {"role": "assistant", "content": "".join(ANSWER)}
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "stop"}
    if name == "mistral":
        message.update(tool_calls=None, prefix=False)
        choice["logprobs"] = None
    elif name == "openrouter":
        message.update(refusal=None, reasoning=None)
        choice.update(logprobs=None, native_finish_reason="stop")
    elif name == "together":
        message["tool_calls"] = []
        choice.update(finish_reason="eos", seed=4021, logprobs=None)
    elif name == "vllm":
        message.update(reasoning_content=None, tool_calls=[])
        choice.update(logprobs=None, stop_reason=None)
    elif name == "deepseek":
        choice["logprobs"] = None
    body = {**_head(name, provider.model, "chat.completion"), "choices": [choice]}
    body["usage"] = _usage(name, streamed=False)
    if name == "groq":
        body.update(usage_breakdown=None, x_groq={"id": "req_01kb2xg5f0e8"})
    if name == "together":
        body["prompt"] = []
    if name == "vllm":
        body.update(prompt_logprobs=None, kv_transfer_params=None)
    return body


def _chunk(provider: Compatible, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    name = provider.name
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    if name == "together":
        text = delta.get("content", "")
        choice.update(text=text, logprobs=None, seed=None)
        choice["delta"] = {"token_id": 791, "role": "assistant", **delta, "tool_calls": None}
    elif name in ("groq", "openrouter", "vllm", "deepseek"):
        choice["logprobs"] = None
    if name == "openrouter":
        choice["native_finish_reason"] = finish
    chunk = {**_head(name, provider.model, "chat.completion.chunk"), "choices": [choice]}
    if name == "together":
        chunk["usage"] = None
    return chunk


def stream(provider: Compatible) -> list[bytes]:
    """A streamed chat completion as `provider` sends it, frame by frame, asked with
    `stream_options={"include_usage": True}` where the provider reads that."""
    name = provider.name
    usage = _usage(name, streamed=True)
    events: list[Any] = []
    if name == "openrouter":
        events.append(": OPENROUTER PROCESSING")
    first = _chunk(provider, {"role": "assistant", "content": ""}, None)
    if name == "groq":
        first["x_groq"] = {"id": "req_01kb2xg5f0e8"}
    events.append(first)
    events += [_chunk(provider, {"content": piece}, None) for piece in ANSWER]
    last = _chunk(provider, {} if name != "together" else {"content": ""}, "stop")
    if name == "groq":  # usage rides on the last chunk, inside x_groq
        last["x_groq"] = {"id": "req_01kb2xg5f0e8", "usage": usage}
    elif name in ("mistral", "together"):  # usage on the finishing chunk, always
        last["usage"] = usage
    events.append(last)
    if name not in ("groq", "mistral", "together"):  # the include_usage chunk
        events.append(
            {**_head(name, provider.model, "chat.completion.chunk"), "choices": [], "usage": usage}
        )
    events.append("[DONE]")
    frames = []
    for event in events:
        if isinstance(event, str) and event.startswith(":"):
            frames.append(f"{event}\n\n".encode())
        else:
            data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
            frames.append(f"data: {data}\n\n".encode())
    return frames


def by_name(name: str) -> Compatible:
    return next(p for p in PROVIDERS if p.name == name)
