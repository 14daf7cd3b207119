"""Prices and the model a call names: the packaged price table, and the names it is keyed by.

Apart from `metering` (which reads usage from a recorded reply, by the reply rules of
`pyrula.replies`), so that a call's limits are checked without loading the reply rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyrula.replies import Usage

__all__ = ["PriceTable", "canonical_model", "deployment", "prices", "requested_model"]


# An application inference profile's id is random: nothing in the ARN names the model.
_PROFILE_ARN = re.compile(r"^arn:aws[\w-]*:bedrock:[^:]*:\d*:application-inference-profile/")


def requested_model(meta: Mapping[str, Any]) -> str | None:
    """The model a request names (Bedrock converse keeps it as `modelId`, from its path)."""
    model = meta.get("model", meta.get("modelId"))
    return model if isinstance(model, str) and model else None


def deployment(meta: Mapping[str, Any]) -> str | None:
    """The name a call was addressed to when it is an opaque alias whose model only the reply
    names (an Azure deployment, a Bedrock application inference profile ARN), else None."""
    name = meta.get("deployment")  # Azure's `/deployments/<name>/...` path
    if isinstance(name, str) and name:
        return name
    model = requested_model(meta)
    if model is None:
        return None
    query = meta.get("query")
    if isinstance(query, dict) and "api-version" in query:
        return model  # an Azure route without a deployment path: the body's model names one
    return model if _PROFILE_ARN.match(model) else None


_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?(?:openai|anthropic|google|meta|amazon)[./]")
_SUFFIXES = (
    re.compile(r"-v\d+(?::\d+)?$"),  # Bedrock version tags
    re.compile(r"-\d+:\d+$"),  # Bedrock's OpenAI ids (openai.gpt-oss-120b-1:0)
    re.compile(r"@\d{8}$"),  # Vertex dates
    re.compile(r"-\d{4}-\d{2}-\d{2}$"),  # OpenAI snapshot dates
    re.compile(r"-\d{8}$"),  # Anthropic snapshot dates
    re.compile(r"-latest$"),
)


def canonical_model(model: str) -> str:
    """`us.anthropic.claude-haiku-4-5-20251001-v1:0` and `claude-haiku-4-5@20251001` ->
    `claude-haiku-4-5`; `openai/gpt-4o-2024-08-06` -> `gpt-4o`."""
    name = model.strip().lower().rsplit("/", 1)[-1] if "/" in model else model.strip().lower()
    name = _PREFIX.sub("", name)
    changed = True
    while changed:
        changed = False
        for pattern in _SUFFIXES:
            trimmed = pattern.sub("", name)
            if trimmed != name:
                name, changed = trimmed, True
    return name


class PriceTable:
    """USD per million tokens by canonical model id; rows you add win over packaged ones."""

    def __init__(self) -> None:
        raw = json.loads(resources.files("pyrula.runtime").joinpath("prices.json").read_text())
        self._rows: dict[str, dict[str, float]] = {
            k: v for k, v in raw.items() if not k.startswith("_")
        }

    def add(
        self,
        model: str,
        *,
        input: float,
        output: float,
        cache_read: float | None = None,
        cache_write: float | None = None,
    ) -> None:
        row = {"input": input, "output": output}
        if cache_read is not None:
            row["cache_read"] = cache_read
        if cache_write is not None:
            row["cache_write"] = cache_write
        self._rows[model] = row
        self._rows[canonical_model(model)] = row

    def row(self, model: str | None) -> dict[str, float] | None:
        if not model:
            return None
        return self._rows.get(model) or self._rows.get(canonical_model(model))

    def cost(self, usage: Usage, model: str | None = None) -> float | None:
        row = self.row(model or usage.model)
        if row is None:
            return None
        per = 1_000_000
        return (
            usage.input_tokens * row["input"]
            + usage.output_tokens * row["output"]
            + usage.cache_read_tokens * row.get("cache_read", row["input"])
            + usage.cache_write_tokens * row.get("cache_write", row["input"])
        ) / per


prices = PriceTable()
