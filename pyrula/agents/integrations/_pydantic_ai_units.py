"""One Pydantic AI durable operation as a journaled unit of a Pyrula run.

`journaled_unit` is what `PyrulaDurability`'s operation backend runs for every operation the
base capability hands it: a model request (metered into `llm:done`, held to the run's caps), a
function-tool call, a toolset's discovery. Each is a `ctx.step` of the run: a cancel boundary, run
once and replayed from the journal ever after. A model request also keeps a digest of what it
asked, so a resumed run that asks something else raises `ReplayInputChanged`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessagesTypeAdapter

from pyrula.errors import ReplayInputChanged
from pyrula.runtime import WorkflowContext, prices
from pyrula.runtime.calls import bypassed, current_run

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# Fields of a Pydantic AI message that differ between two asks of the same thing.
_VOLATILE = frozenset({"timestamp", "run_id", "conversation_id"})


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in sorted(value.items()) if k not in _VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def request_digest(cache_key: tuple[object, ...]) -> str:
    """A digest of a model request's messages, settings and tool definitions, without the
    fields that vary between identical asks (timestamps, run ids)."""
    messages = cache_key[1] if len(cache_key) > 1 else []
    try:
        dumped: Any = ModelMessagesTypeAdapter.dump_python(messages, mode="json")  # type: ignore[arg-type]
    except Exception:  # a projection of another shape: fall back on its text
        dumped = repr(messages)
    rest = [_jsonable(part) for part in cache_key[2:4]]
    text = json.dumps(_stable([dumped, rest]), sort_keys=True, default=repr)
    # A repr that names an object's address differs between processes: never compare it.
    text = _ADDRESS.sub("", text)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _jsonable(value: Any) -> Any:
    """Settings and request parameters as JSON where pydantic can dump them, else their repr."""
    try:
        return TypeAdapter(type(value)).dump_python(value, mode="json")
    except Exception:
        return repr(value)


def _max_tokens(cache_key: tuple[object, ...]) -> int | None:
    settings = cache_key[2] if len(cache_key) > 2 else None
    value = settings.get("max_tokens") if isinstance(settings, dict) else None
    return value if isinstance(value, int) else None


def _usage_payload(response: Any, model_name: str) -> dict[str, Any]:
    """The `llm:done` payload of a model request that answered with `response` (as JSON)."""
    usage = response.get("usage") if isinstance(response, dict) else None
    usage = usage if isinstance(usage, dict) else {}

    def count(name: str) -> int:
        value = usage.get(name)
        return int(value) if isinstance(value, int) else 0

    model = response.get("model_name") if isinstance(response, dict) else None
    model = model if isinstance(model, str) and model else model_name
    input_tokens, output_tokens = count("input_tokens"), count("output_tokens")
    cache_read, cache_write = count("cache_read_tokens"), count("cache_write_tokens")
    row = prices.row(model) or prices.row(model_name)
    cost = None
    if row is not None:
        cost = (
            (input_tokens - cache_read - cache_write) * row["input"]
            + output_tokens * row["output"]
            + cache_read * row.get("cache_read", row["input"])
            + cache_write * row.get("cache_write", row["input"])
        ) / 1_000_000
    scope = current_run().scope
    return {
        "position": None,
        "surface": "pydantic_ai",
        "model": model,
        "requested_model": model_name,
        "status": 200,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
        "total_tokens": input_tokens + output_tokens,
        "cost_usd": cost,
        "estimated": False,
        "within": "run",
        "step_id": scope.unit,
        "integration": "pydantic_ai",
    }


async def model_request_unit(
    name: str,
    model_name: str,
    cache_key: tuple[object, ...],
    body: Callable[[], Awaitable[object]],
) -> object:
    """A model request as a journaled unit: metered, capped, replayed without calling the
    provider; a resumed run that asks something else raises `ReplayInputChanged`."""
    attempt = current_run().attempt
    assert attempt is not None
    digest = request_digest(cache_key)

    async def ask() -> dict[str, Any]:
        meta: dict[str, Any] = {"model": model_name}
        limit = _max_tokens(cache_key)
        if limit is not None:
            meta["max_tokens"] = limit
        reservation = attempt.budget.reserve(len(digest), meta)
        try:
            # A drop-in or journaled transport under the model writes no second entry.
            with bypassed():
                response = await body()
        finally:
            attempt.budget.settle(reservation, None)
        # Group-committed, as a step's outcome is: on PostgreSQL the loop never waits on it.
        await attempt.awrite("llm:done", _usage_payload(response, model_name))
        return {"asked": digest, "response": response}

    record = await WorkflowContext(attempt).step(name, ask)
    if isinstance(record, dict) and record.get("asked") != digest:
        raise ReplayInputChanged(
            f"run {attempt.run.id}: the Pydantic AI model request {name!r} asks something other "
            "than what was journaled there (its messages, settings or tools changed); a resumed "
            "run must ask what it asked before: start a new run (or fork this one) instead",
            differences=["model request messages, settings or tools"],
        )
    return record.get("response") if isinstance(record, dict) else record


async def tool_unit(name: str, body: Callable[[], Awaitable[object]]) -> object:
    """A tool call (or a toolset's discovery) as a journaled unit: run once, then replayed."""
    attempt = current_run().attempt
    assert attempt is not None
    return await WorkflowContext(attempt).step(name, body)
