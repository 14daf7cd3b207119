"""`durable_chat_model(model)`: any LangChain chat model, journaled inside a Pyrula run.

Inside a run each async call (`ainvoke`, `astream`, `abatch`, and what `bind_tools` or
`with_structured_output` return) takes one journal position, is held to the run's caps before
anything is sent, writes one `llm:done` with the reply's usage, and replays from the journal with
no provider call; a changed request raises `ReplayInputChanged`. Each call is a cancel and pause
boundary. Outside a run the wrapper passes every call to the wrapped model unchanged.

Where the model's SDK client is reachable (`ChatOpenAI`, `ChatAnthropic`) the provider's own
HTTP exchange is journaled (`_provider_http`); for any other model the `ChatResult` is
(`_result_journal`). `_astream` is not overridden, so `astream()` yields the whole reply as one
chunk from one journaled call. The sync path (`invoke`, `_generate`) cannot be journaled: inside
a run, on its threads too, it raises `UnjournaledSurface`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import agenerate_from_stream
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import ConfigDict, PrivateAttr

from pyrula.agents.integrations._provider_http import (
    calling_through,
    journaled_copy,
    sdk_client_of,
    sdk_outcomes,
)
from pyrula.agents.integrations._rebinding import rebound
from pyrula.agents.integrations._result_journal import journaled_result, request_body
from pyrula.errors import UnjournaledSurface
from pyrula.runtime.calls import RunContext, acall_frame, current_run

__all__ = ["DurableChatModel", "durable_chat_model"]

_SYNC_REFUSED = (
    "{model}.invoke() (the sync path, `_generate`) cannot be journaled inside a Pyrula run; use "
    "`await model.ainvoke(...)` (or `astream` / `abatch`), which journal the call"
)


def _streams(model: BaseChatModel, kwargs: dict[str, Any]) -> bool:
    """Whether LangChain itself would serve the model's `ainvoke` from its `_astream`."""
    if type(model)._astream is BaseChatModel._astream:
        return False
    wanted = kwargs.get("stream")
    return bool(wanted if wanted is not None else getattr(model, "streaming", False))


def _with_usage(model: BaseChatModel, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Inside a run a streamed call asks for the usage chunk where the model can (`ChatOpenAI`'s
    `stream_usage`), so the meter sees what the call cost; the caller's own choice stands."""
    # ChatOpenAI (and the langchain-openai models built on it) read `stream_usage` there.
    if not hasattr(model, "_should_stream_usage") or "stream_usage" in kwargs:
        return kwargs
    if getattr(model, "stream_usage", None) is False and "stream_usage" in model.model_fields_set:
        return kwargs
    return {**kwargs, "stream_usage": True}


def _journaling(run: RunContext) -> bool:
    return run.in_run and not run.bypassed


# Signals LangChain must let through as they are, not carry.
_NOT_CARRIED = (asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit)


class _Carried(Exception):
    """Carries a journal refusal (a `BaseException`: `ReplayInputChanged`, `BudgetExceeded`, a
    cancel or hand-off) through LangChain's `agenerate`, which mishandles a `BaseException`
    that is not an `Exception`; `ainvoke` raises the refusal itself again."""

    def __init__(self, carried: BaseException) -> None:
        self.carried = carried
        super().__init__(f"{type(carried).__name__}: {carried}")


class DurableChatModel(BaseChatModel):  # type: ignore[misc]  # Any when langchain is absent
    """A LangChain chat model whose async calls are journaled inside a Pyrula run (build it with
    `durable_chat_model`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseChatModel
    # Where `inner` keeps its SDK client, and the journaled copy of that client a run calls.
    _client_attribute: str = PrivateAttr(default="")
    _sdk_client: Any = PrivateAttr(default=None)

    @property
    def _llm_type(self) -> str:
        return f"pyrula-durable-{self.inner._llm_type}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"inner": self.inner._identifying_params}

    # -- the sync path: refused in a run ---------------------------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if _journaling(current_run()):
            raise UnjournaledSurface(_SYNC_REFUSED.format(model=type(self.inner).__name__))
        return self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    # -- the async path: journaled in a run ------------------------------------------------------

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        run = current_run()

        async def produce(model: BaseChatModel = self.inner) -> ChatResult:
            if _streams(model, kwargs):
                # LangChain would stream this model (`streaming=True`): its `_agenerate` then
                # expects to be bypassed, so gather its own stream into one result.
                options = _with_usage(model, kwargs) if _journaling(run) else kwargs
                chunks = model._astream(messages, stop=stop, run_manager=run_manager, **options)
                return await agenerate_from_stream(chunks)
            return await model._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)

        if not _journaling(run) or run.attempt is None:
            return await produce()
        try:
            await run.attempt.acheck_cancel()  # a cancel and pause boundary, journaled or replayed
            if self._sdk_client is not None:
                # One call, one position, whatever the SDK retries; its error outcome replays
                # as the SDK's own exception. The call goes through a copy of the model on the
                # journaled client: the caller's model and client stay as they are.
                journaled = calling_through(self.inner, self._client_attribute, self._sdk_client)
                async with acall_frame(sdk_outcomes(self._sdk_client)):
                    return await produce(journaled)
            body = request_body(self.inner, messages, stop, kwargs)
            return await journaled_result(self.inner, body, produce)
        except Exception:
            raise
        except _NOT_CARRIED:
            raise
        except BaseException as refusal:
            raise _Carried(refusal) from refusal

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        try:
            return await super().ainvoke(input, config, stop=stop, **kwargs)
        except _Carried as carrier:
            raise carrier.carried.with_traceback(carrier.carried.__traceback__) from None

    async def abatch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Any]:
        """Inside a run the calls go one after another, so each takes its position in input
        order on every attempt; outside one, LangChain's own (concurrent) batch."""
        if not _journaling(current_run()):
            batch: list[Any] = await super().abatch(
                inputs, config, return_exceptions=return_exceptions, **kwargs
            )
            return batch
        configs = config if isinstance(config, list) else [config or {}] * len(inputs)
        results: list[Any] = []
        for item, item_config in zip(inputs, configs, strict=True):
            try:
                results.append(await self.ainvoke(item, item_config, **kwargs))
            except Exception as exc:
                if not return_exceptions:
                    raise
                results.append(exc)
        return results

    # -- helpers that must keep the wrapper (not the inner model) in the chain ------------------

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """The inner model's `bind_tools` (its own tool format), bound to this wrapper."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return rebound(self.inner.bind_tools(tools, **kwargs), self.inner, self)  # type: ignore[no-any-return]

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, Any]:
        """The inner model's structured output (its own method and parser), calling this
        wrapper: a replay parses the journaled reply into the identical value."""
        built = self.inner.with_structured_output(schema, include_raw=include_raw, **kwargs)
        return rebound(built, self.inner, self)  # type: ignore[no-any-return]


def durable_chat_model(model: BaseChatModel) -> DurableChatModel:
    """Wrap a LangChain chat model so its async calls are journaled inside a Pyrula run.

    `ChatOpenAI` and `ChatAnthropic` are journaled at their SDK's HTTP client: a run's calls go
    through a copy of the client on Pyrula's transport (a client already on it is not journaled
    twice), with a connection pool of each event loop's own, so the journal holds the provider's
    own request and reply. `model` itself is not changed. Any other chat model's `ChatResult` is
    journaled instead. Do not wrap the result in `with_fallbacks` or `with_retry` (a fallback
    would call a model live during a replay); put LangGraph's `RetryPolicy` on the node.
    """
    if isinstance(model, DurableChatModel):
        return model
    if not isinstance(model, BaseChatModel):
        raise TypeError(
            f"durable_chat_model() takes a LangChain chat model (a BaseChatModel), not a "
            f"{type(model).__name__}; for a bound model wrap the model first, then call "
            "`bind_tools` / `with_structured_output` on what durable_chat_model returns"
        )
    wrapper = DurableChatModel(inner=model)
    found = sdk_client_of(model)
    if found is not None:
        wrapper._client_attribute, client = found
        wrapper._sdk_client = journaled_copy(client)
    return wrapper
