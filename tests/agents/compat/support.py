"""Shared pieces of the drop-in tests: what a surface-table row promises inside a run (checked
the same way for every drop-in), the drop-in clients over a stand-in, and a boto3 call run on a
thread of a parked run."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pydantic
import pytest

from pyrula.agents import AgentContext, UnjournaledSurface, agent
from pyrula.agents.compat._surfaces import SurfaceTable
from pyrula.agents.compat.anthropic import Anthropic, AsyncAnthropic
from pyrula.agents.compat.bedrock import journaled_bedrock
from pyrula.agents.compat.openai import AsyncAzureOpenAI, AsyncOpenAI, AzureOpenAI, OpenAI
from pyrula.errors import SurfaceUnavailable
from pyrula.runtime import answer
from tests.fakes import bedrock_api as bs
from tests.fakes.anthropic_api import anthropic_client
from tests.fakes.openai_api import openai_client
from tests.fakes.provider import OPENAI_LIB, Upstream
from tests.runtime.support import drive, new_store, run_to_rest


def arrives_later(table: SurfaceTable, path: str) -> str:
    """The release that brought `path` when the installed SDK is older than it, else ""."""
    since = table.classify(path).since
    if not since:
        return ""
    installed = tuple(int(p) for p in metadata.version(table.sdk).split(".")[:3] if p.isdigit())
    return since if installed < tuple(int(p) for p in since.split(".")) else ""


def assert_unavailable(client: Any, call: str, since: str) -> None:
    """Reaching `client.<call>` on an SDK release older than `since` names the release to get."""
    with pytest.raises(SurfaceUnavailable, match=rf"needs .* {re.escape(since)} or later"):
        functools.reduce(getattr, call.split("."), client)


async def invoke(client: Any, call: str, kwargs: dict[str, Any]) -> Any:
    """`client.<call>(**kwargs)`, awaited, and a `stream` helper's manager entered and read."""
    target = client
    for name in call.split("."):
        target = getattr(target, name)
    result = target(**kwargs)
    if hasattr(result, "__aenter__") and call.endswith(".stream"):
        async with result as stream:
            return [event async for event in stream]
    if inspect.isawaitable(result):
        result = await result
    return result


def dumped(value: Any) -> Any:
    """An SDK object (or a list of them) as JSON values, to compare a live one with its replay."""
    if isinstance(value, list):
        return [dumped(v) for v in value]
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    return value


def park_and_resume(body: Callable[[AgentContext], Awaitable[Any]], name: str) -> Any:
    """Run `body`, park the run on an interrupt, answer it, and drive the resumed attempt."""

    @agent(name=name)
    async def parked(ctx: AgentContext) -> Any:
        await body(ctx)
        await ctx.interrupt("go on?")
        return "done"

    store = new_store()
    handle = run_to_rest(parked, store=store)
    assert handle.record.status == "parked"
    answer(handle.id, "yes", store=store)
    drive(store)
    assert handle.record.status == "completed", handle.events()[-1].payload
    return handle


def check_row(
    verdict: str,
    path: str,
    call: tuple[str, dict[str, Any]],
    make_client: Callable[[], Any],
    seen: list[str],
    follow_up: tuple[str, dict[str, Any], str],
) -> None:
    """Call `path` inside a run, then a journaled `follow_up` (call, kwargs, "METHOD /path"),
    and hold the row to its verdict: refused sends nothing; journaled takes a position and is
    not sent again on resume; passed through takes none and is sent again."""
    name, kwargs = call
    if verdict == "refused":
        caught: list[BaseException] = []

        @agent(name=f"row_refused_{path}")
        async def refused(ctx: AgentContext) -> None:
            try:
                await invoke(make_client(), name, kwargs)
            except UnjournaledSurface as exc:
                caught.append(exc)

        run_to_rest(refused)
        assert seen == [] and len(caught) == 1
        assert f"`{name}`" in str(caught[0]) or f"`{path}" in str(caught[0])
        return

    async def body(ctx: AgentContext) -> None:
        client = make_client()
        await invoke(client, name, kwargs)
        # The next journaled call shows whether the one above took a journal position.
        await invoke(client, follow_up[0], follow_up[1])

    handle = park_and_resume(body, f"row_{path}")
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    if verdict == "journaled":
        assert len(seen) == 2, seen  # both calls once; the resume sent nothing
        assert [d["position"] for d in done] == ["main/llm0", "main/llm1"]
    else:
        assert len(seen) == 3, seen  # the passthrough ran again on resume
        assert seen[0] == seen[2] and seen[1] == follow_up[2]
        assert [d["position"] for d in done] == ["main/llm0"]


# -- the drop-in clients, sending to a stand-in ------------------------------------------------


class Answer(pydantic.BaseModel):
    answer: str


CHAT = {"model": "gpt-6-luna", "messages": [{"role": "user", "content": "Ping?"}]}
RESP = {"model": "gpt-6-luna", "input": "Ping?"}


def openai_dropin(stub: Upstream, **kw: Any) -> AsyncOpenAI:
    """The async OpenAI drop-in sending to `stub` (`kw` go to the client)."""
    return openai_client(
        stub, cls=AsyncOpenAI, journaled=False, api_key="sk-unused", max_retries=0, **kw
    )


def openai_sync_dropin(stub: Upstream) -> OpenAI:
    return openai_client(stub, cls=OpenAI, journaled=False, api_key="sk-unused", max_retries=0)


AZURE_ENDPOINT = "https://pyrula-test.openai.azure.com"


def azure_dropin(stub: Upstream, *, sync: bool = False, **kw: Any) -> Any:
    """The Azure OpenAI drop-in (async, or the sync one) sending to `stub`."""
    cls, http = (
        (AzureOpenAI, OPENAI_LIB.Client) if sync else (AsyncAzureOpenAI, OPENAI_LIB.AsyncClient)
    )
    return cls(
        api_key="sk-unused",
        api_version="2024-10-21",
        azure_endpoint=AZURE_ENDPOINT,
        http_client=http(transport=stub.transport()),
        max_retries=0,
        **kw,
    )


def anthropic_dropin(stub: Upstream, **kw: Any) -> AsyncAnthropic:
    """The async Anthropic drop-in sending to `stub` (`kw` go to the client)."""
    return anthropic_client(
        stub, cls=AsyncAnthropic, journaled=False, api_key="sk-ant-unused", max_retries=0, **kw
    )


def anthropic_sync_dropin(stub: Upstream, **kw: Any) -> Anthropic:
    return anthropic_client(
        stub, cls=Anthropic, journaled=False, api_key="sk-ant-unused", max_retries=0, **kw
    )


# -- instructor: a model whose validator rejects a first answer --------------------------------


class User(pydantic.BaseModel):
    name: str
    age: int

    @pydantic.field_validator("name")
    @classmethod
    def shouted(cls, value: str) -> str:
        if value != value.upper():
            raise ValueError("name must be upper case")
        return value


# -- boto3: a call on a thread of a parked run, and what it journaled ----------------------------


MESSAGES = [{"role": "user", "content": [{"text": "Ping?"}]}]


def converse(client: Any, **kw: Any) -> Any:
    return client.converse(modelId=bs.MODEL_ID, messages=MESSAGES, **kw)


def converse_stream(client: Any, **kw: Any) -> list[Any]:
    reply = client.converse_stream(modelId=bs.MODEL_ID, messages=MESSAGES, **kw)
    return [reply["ResponseMetadata"]["RequestId"], *reply["stream"]]


class Case:
    """One run of `call(client)` on a thread of the run, parked, answered and resumed: what each
    attempt got, and how many requests each sent."""

    def __init__(self, stub: bs.BedrockStub, name: str, **client_kw: Any) -> None:
        self.stub = stub
        self.name = name
        self.client_kw = client_kw
        self.results: list[tuple[str, Any]] = []
        self.events: list[Any] = []
        self.sent: list[int] = []
        self.store = new_store()

    def run(self, call: Callable[[Any], Any]) -> Any:
        case = self

        @agent(name=self.name)
        async def parked(ctx: AgentContext) -> str:
            client = journaled_bedrock(bs.client(case.stub, **case.client_kw))
            before = case.stub.count()
            try:
                case.results.append(("ok", await ctx.to_thread(call, client)))
            except Exception as exc:
                case.results.append(("error", exc))
            case.sent.append(case.stub.count() - before)
            await ctx.interrupt("go on?")
            return "done"

        handle = run_to_rest(parked, store=self.store)
        assert handle.record.status == "parked", handle.events()[-1].payload
        answer(handle.id, "yes", store=self.store)
        drive(self.store)
        self.events = handle.events()
        assert handle.record.status == "completed", self.events[-1].payload
        return handle


def llm_done(handle: Any) -> list[dict[str, Any]]:
    return [e.payload for e in handle.events() if e.type == "llm:done"]


def without_metadata(reply: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in reply.items() if k != "ResponseMetadata"}


def store_bytes(store: Any) -> bytes:
    """Every byte of the store's files, LMDB pages as they lie on disk."""
    return b"".join(p.read_bytes() for p in Path(store.path).rglob("*") if p.is_file())
