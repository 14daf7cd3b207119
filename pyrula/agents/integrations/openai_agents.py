"""The OpenAI Agents SDK recipe: its default client is Pyrula's journaled `AsyncOpenAI`.

```python
from agents import Runner
from pyrula.agents.integrations.openai_agents import PyrulaRunHooks, use_journaled_client

use_journaled_client()                       # set_default_openai_client(compat.AsyncOpenAI())
result = await Runner.run(triage, text, hooks=PyrulaRunHooks())   # inside a Pyrula run
```

A recipe, not an adapter: each model call the SDK makes (handoffs and guardrail agents included,
`Runner.run` or `Runner.run_streamed`) goes through the journaled client and is replayed on a
resume. A tool's side effect runs once only inside `ctx.step` (with
`failure_error_function=None` and `ToolExecutionConfig(max_function_tool_concurrency=1)`).

`PyrulaRunHooks` warns (`UnjournaledWork`), inside a run, about what it can see the SDK do
outside the journal: a model that does not send through a journaled client (LiteLLM, any-llm,
the Responses websocket transport), a tool with `needs_approval`, and trace export. Session
memory, Realtime and voice are not visible to run hooks: see docs/openai-agents.md.
"""

from __future__ import annotations

import warnings
from typing import Any

import agents
from agents import RunHooks
from agents.models import _openai_shared  # the SDK's only home for its default client
from agents.tracing import get_current_trace
from agents.tracing.traces import NoOpTrace

from pyrula.agents.compat.openai import AsyncOpenAI
from pyrula.errors import UnjournaledWork
from pyrula.runtime.calls import current_run

__all__ = ["PyrulaRunHooks", "unjournaled", "use_journaled_client"]


class _StreamsThroughCreate:
    """`client.responses` without `with_streaming_response`, which a run refuses (its replay
    would call the provider again): the SDK then streams through `responses.create(stream=True)`,
    which the drop-in journals frame by frame."""

    with_streaming_response = None

    def __init__(self, resource: Any) -> None:
        self._resource = resource

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resource, name)


def use_journaled_client(client: AsyncOpenAI | None = None) -> AsyncOpenAI:
    """Make `client` (a journaled `AsyncOpenAI`, built with the SDK's defaults if omitted) the
    OpenAI Agents SDK's default client; it is not used to export traces. `Runner.run_streamed`
    then streams through `responses.create(stream=True)`, journaled."""
    client = client if client is not None else AsyncOpenAI()
    if not isinstance(client, AsyncOpenAI):
        raise TypeError(
            "use_journaled_client takes pyrula.agents.compat.openai.AsyncOpenAI (or "
            "journaled(client)); a plain openai.AsyncOpenAI is not journaled"
        )
    if not isinstance(vars(client).get("responses"), _StreamsThroughCreate):
        vars(client)["responses"] = _StreamsThroughCreate(client.responses)
    agents.set_default_openai_client(client, use_for_tracing=False)
    return client


def _is_journaled(client: Any) -> bool:
    return isinstance(client, AsyncOpenAI)


def _model_finding(agent: Any) -> str | None:
    model = getattr(agent, "model", None)
    name = getattr(agent, "name", "?")
    if model is None or isinstance(model, str):
        if _openai_shared.get_default_openai_responses_transport() == "websocket":
            return (
                f"agent {name!r}: the Responses websocket transport bypasses the client's HTTP "
                "transport, so its model calls are not journaled; call "
                "set_default_openai_responses_transport('http')"
            )
        if not _is_journaled(_openai_shared.get_default_openai_client()):
            return (
                f"agent {name!r}: the SDK's default client is not journaled; call "
                "pyrula.agents.integrations.openai_agents.use_journaled_client()"
            )
        return None
    kind = type(model).__name__
    if "WS" in kind or "Websocket" in kind or "WebSocket" in kind:
        return (
            f"agent {name!r}: model {kind} talks over a websocket the journal cannot see; use "
            "OpenAIResponsesModel on a journaled AsyncOpenAI"
        )
    client = getattr(model, "_client", None)
    if not _is_journaled(client):
        return (
            f"agent {name!r}: model {kind} does not send through a journaled AsyncOpenAI "
            "(LiteLLM and any-llm models never do), so its calls are sent again on a resume; "
            "use OpenAIResponsesModel or OpenAIChatCompletionsModel on pyrula's AsyncOpenAI"
        )
    return None


def unjournaled(agent: Any) -> list[str]:
    """What `agent` would do outside the journal, as far as the SDK lets one see it."""
    findings: list[str] = []
    model = _model_finding(agent)
    if model is not None:
        findings.append(model)
    for tool in getattr(agent, "tools", None) or []:
        if getattr(tool, "needs_approval", False):
            findings.append(
                f"agent {agent.name!r}: tool {getattr(tool, 'name', '?')!r} has needs_approval, "
                "which is not a durable pause (a resumed run does not keep the interruption); "
                "ask with ctx.interrupt(...) in a Pyrula step instead"
            )
    trace = get_current_trace()
    if trace is not None and not isinstance(trace, NoOpTrace):
        findings.append(
            "trace export is on: traces are sent outside the journal, again on every replay; "
            "call agents.set_tracing_disabled(True) or RunConfig(tracing_disabled=True)"
        )
    return findings


class PyrulaRunHooks(RunHooks[Any]):
    """Run hooks that warn (`UnjournaledWork`), inside a Pyrula run, about each agent's work the
    journal will not replay. Outside a run they do nothing."""

    def __init__(self) -> None:
        self._warned: set[str] = set()

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        if not current_run().in_run:
            return
        for finding in unjournaled(agent):
            if finding not in self._warned:
                self._warned.add(finding)
                warnings.warn(finding, UnjournaledWork, stacklevel=2)
