"""The `llm:done` event of a model call: what it used, which model served it, what it cost."""

from __future__ import annotations

from typing import Any

from pyrula.fingerprints import Canonical, surfaces
from pyrula.journal.recorder import Reply
from pyrula.runtime.metering import (
    arrived_output_tokens,
    canonical_model,
    deployment,
    prices,
    requested_model,
    usage_from_reply,
)
from pyrula.runtime.positions import Scope


def _on_a_cloud(canonical: Canonical) -> bool:
    return canonical.surface == surfaces.BEDROCK_CONVERSE or canonical.meta.get("platform") in (
        "bedrock",
        "vertex",
    )


def llm_payload(
    canonical: Canonical, reply: Reply, scope: Scope, position: str | None
) -> dict[str, Any]:
    """The payload of the `llm:done` event of the call `canonical` that got `reply`."""
    usage = usage_from_reply(canonical.surface, b"".join(reply.frames), reply.streamed)
    alias = deployment(canonical.meta)  # an Azure deployment: only the reply names a model
    requested = alias or requested_model(canonical.meta)
    model = usage.model or requested
    # An alias with a price row of its own is priced by it, else by the model that served it.
    priced = alias if alias is not None and prices.row(alias) else model
    if alias is None and requested is not None and _on_a_cloud(canonical):
        # A cloud's id (`us.anthropic.claude-haiku-4-5-20251001-v1:0`) is priced as asked,
        # else by its canonical form, which is what `model` records.
        model, priced = canonical_model(requested), requested
    payload = {
        "position": position,
        "surface": canonical.surface,
        "model": model,
        "requested_model": requested,
        "status": reply.status,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "total_tokens": usage.total_tokens,
        "cost_usd": prices.cost(usage, priced),
        "estimated": False,
        "within": scope.charged_to,
        "step_id": scope.unit,
    }
    if usage.error is not None:
        payload["error"] = usage.error  # billed, but the provider reported a failed call
    return payload


def estimated_payload(
    canonical: Canonical, reply: Reply, scope: Scope, reserved_tokens: int
) -> dict[str, Any]:
    """The `llm:done` payload of a call whose reply ended unfinished: it was (partly) billed,
    so it counts, at the larger of what it reported and the `reserved_tokens` held for it."""
    payload = llm_payload(canonical, reply, scope, None)
    # Text and tool arguments that had streamed were billed as output, usage or not.
    arrived = arrived_output_tokens(canonical.surface, b"".join(reply.frames), reply.streamed)
    if arrived > payload["output_tokens"]:
        payload["total_tokens"] += arrived - payload["output_tokens"]
        payload["output_tokens"] = arrived
    payload["total_tokens"] = max(payload["total_tokens"], reserved_tokens)
    payload["estimated"] = True
    return payload
