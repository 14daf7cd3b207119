"""The Anthropic drop-in: the SDK's own client classes (direct, Bedrock, Vertex), sending
through Pyrula's journal transport.

Each class is a subclass of the SDK's, with its resources routed through the Anthropic surface
table (`_anthropic_surfaces`); the machinery is shared with the OpenAI drop-in (`_stainless`).
Importing a cloud class needs neither boto3 nor google-auth: the SDK loads them when the first
request is signed.
"""

from __future__ import annotations

from typing import Any

import anthropic

from pyrula.agents.compat._anthropic_surfaces import ANTHROPIC
from pyrula.agents.compat._registry import journaled, register
from pyrula.agents.compat._stainless import Provider, drop_in

__all__ = [
    "Anthropic",
    "AnthropicBedrock",
    "AnthropicVertex",
    "AsyncAnthropic",
    "AsyncAnthropicBedrock",
    "AsyncAnthropicVertex",
    "journaled",
]


def _middleware(client: Any) -> str | None:
    if not getattr(client, "_middleware", None):
        return None
    return (
        "the client has middleware, which may send a request more than once while one journal "
        "position would hide the rest; use a client without `middleware=` / `with_middleware` "
        "inside a run"
    )


PROVIDER = Provider(
    sdk=anthropic,
    table=ANTHROPIC,
    instructor_call=("messages", "create"),
    instructor_order="`instructor.from_anthropic(journaled(client))`",
    refuse_client=_middleware,
    not_converted=(
        "AnthropicFoundry",
        "AsyncAnthropicFoundry",
        "AnthropicAWS",
        "AsyncAnthropicAWS",
        "AnthropicBedrockMantle",
        "AsyncAnthropicBedrockMantle",
    ),
)


@drop_in(PROVIDER)
class Anthropic(anthropic.Anthropic):
    """`anthropic.Anthropic`, journaled inside a run (the sync twin: call it on a thread of the
    run)."""


@drop_in(PROVIDER)
class AsyncAnthropic(anthropic.AsyncAnthropic):
    """`anthropic.AsyncAnthropic`, journaled inside a run."""


@drop_in(PROVIDER)
class AnthropicBedrock(anthropic.AnthropicBedrock):
    """`anthropic.AnthropicBedrock`, journaled inside a run; the request is signed (SigV4 or
    your `api_key`) before the journal sees it, and the signature is never stored."""


@drop_in(PROVIDER)
class AsyncAnthropicBedrock(anthropic.AsyncAnthropicBedrock):
    """`anthropic.AsyncAnthropicBedrock`, journaled inside a run."""


@drop_in(PROVIDER)
class AnthropicVertex(anthropic.AnthropicVertex):
    """`anthropic.AnthropicVertex`, journaled inside a run."""


@drop_in(PROVIDER)
class AsyncAnthropicVertex(anthropic.AsyncAnthropicVertex):
    """`anthropic.AsyncAnthropicVertex`, journaled inside a run."""


register(
    PROVIDER,
    [
        (anthropic.AsyncAnthropicBedrock, AsyncAnthropicBedrock),
        (anthropic.AnthropicBedrock, AnthropicBedrock),
        (anthropic.AsyncAnthropicVertex, AsyncAnthropicVertex),
        (anthropic.AnthropicVertex, AnthropicVertex),
        (anthropic.AsyncAnthropic, AsyncAnthropic),
        (anthropic.Anthropic, Anthropic),
    ],
)
