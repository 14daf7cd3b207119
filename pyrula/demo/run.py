"""The demo flow: record four real SDK calls against the stand-in, stop it, replay them offline.

Both SDKs are the real ones, each handed an HTTP client whose transport is Pyrula's journaling
transport for the HTTP stack that SDK is built on (httpx2 for openai 3.x / anthropic 2.x, httpx
for openai 2.x / anthropic 0.x). Recording runs in the cassette `pyrula-demo` with mode "all";
replay runs in mode "none", which blocks the network, after the stand-in has been stopped.
The counts shown come from the stand-in's own request log.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import anthropic
import openai
from rich.console import Console
from rich.table import Table

import pyrula
from pyrula.demo.stacks import http_client, stack_name, uses_httpx2
from pyrula.demo.standin import Served, StandIn
from pyrula.errors import OfflineViolation, PyrulaError
from pyrula.journal import Exchanges, open_store
from pyrula.journal.keys import namespace_prefix, split_key

C = TypeVar("C")

CASSETTE = "pyrula-demo"
DEMO_KEY = "sk-demo-not-a-real-key"  # the stand-in accepts any key; nothing real is sent
OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-haiku-4-5"


# -- results ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What the caller got back: the provider's id for the reply and its text."""

    id: str
    text: str


@dataclass
class CallResult:
    provider: str
    call: str
    streamed: bool
    style: str  # "sync" or "async" client
    recorded: Reply
    replayed: Reply | None = None

    @property
    def matches(self) -> bool:
        return self.replayed is not None and self.replayed == self.recorded


@dataclass
class DemoResult:
    store: Path
    url: str
    stacks: dict[str, str]  # SDK name -> "openai 3.57.0 over httpx2"
    calls: list[CallResult]
    live_calls: int  # requests in the stand-in's log when recording ended
    replay_calls: int  # requests it logged after that, through the end of the replay
    log: list[Served]  # the stand-in's whole log, read after the replay
    recorded: int  # what the recording cassette says it recorded
    replayed: int  # what the replay cassette says it replayed
    replay_error: str | None = None
    elapsed_s: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        expected = len(CALLS)
        return (
            self.replay_error is None
            and all(call.matches for call in self.calls)
            and len(self.calls) == expected
            and self.live_calls == expected
            and self.replay_calls == 0
            and self.recorded == expected
            and self.replayed == expected
        )


# -- the four calls --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoCall:
    """One call of the demo: which SDK surface, how, and the function that makes it."""

    provider: str
    call: str
    streamed: bool
    style: str
    prompt: str
    run: Callable[[StandIn, str], Reply]


def _client(cls: Callable[..., C], sdk: ModuleType, base_url: str, *, sync: bool) -> C:
    """An SDK client over Pyrula's transport for that SDK's HTTP stack."""
    return cls(
        api_key=DEMO_KEY,
        base_url=base_url,
        http_client=http_client(sdk, sync=sync),
        max_retries=0,  # a retry would be a second provider call: keep the counts exact
    )


def openai_plain(standin: StandIn, prompt: str) -> Reply:
    with _client(openai.OpenAI, openai, standin.openai_base_url, sync=True) as client:
        completion = client.chat.completions.create(
            model=OPENAI_MODEL, messages=[{"role": "user", "content": prompt}]
        )
    return Reply(completion.id, completion.choices[0].message.content or "")


async def _openai_streamed(standin: StandIn, prompt: str) -> Reply:
    async with _client(openai.AsyncOpenAI, openai, standin.openai_base_url, sync=False) as client:
        stream = await client.chat.completions.create(
            model=OPENAI_MODEL,
            messages=[{"role": "user", "content": prompt}],
            stream=True,
            stream_options={"include_usage": True},
        )
        ident, parts = "", []
        async for chunk in stream:
            ident = ident or chunk.id
            parts += [c.delta.content for c in chunk.choices if c.delta.content]
    return Reply(ident, "".join(parts))


def openai_streamed(standin: StandIn, prompt: str) -> Reply:
    return asyncio.run(_openai_streamed(standin, prompt))


async def _anthropic_plain(standin: StandIn, prompt: str) -> Reply:
    async with _client(
        anthropic.AsyncAnthropic, anthropic, standin.anthropic_base_url, sync=False
    ) as client:
        message = await client.messages.create(
            model=ANTHROPIC_MODEL, max_tokens=256, messages=[{"role": "user", "content": prompt}]
        )
    text = "".join(block.text for block in message.content if block.type == "text")
    return Reply(message.id, text)


def anthropic_plain(standin: StandIn, prompt: str) -> Reply:
    return asyncio.run(_anthropic_plain(standin, prompt))


def anthropic_streamed(standin: StandIn, prompt: str) -> Reply:
    with (
        _client(anthropic.Anthropic, anthropic, standin.anthropic_base_url, sync=True) as client,
        client.messages.stream(
            model=ANTHROPIC_MODEL, max_tokens=256, messages=[{"role": "user", "content": prompt}]
        ) as stream,
    ):
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    return Reply(message.id, text)


CALLS: tuple[DemoCall, ...] = (
    DemoCall(
        "openai",
        "chat.completions",
        False,
        "sync",
        "What is the capital of France?",
        openai_plain,
    ),
    DemoCall(
        "openai",
        "chat.completions",
        True,
        "async",
        "Name three primary colours, please.",
        openai_streamed,
    ),
    DemoCall(
        "anthropic",
        "messages",
        False,
        "async",
        "Summarise Hamlet in one line.",
        anthropic_plain,
    ),
    DemoCall(
        "anthropic",
        "messages",
        True,
        "sync",
        "Write a haiku about keeping a journal.",
        anthropic_streamed,
    ),
)


def _make_calls(standin: StandIn) -> list[Reply]:
    return [call.run(standin, call.prompt) for call in CALLS]


def describe_error(exc: BaseException) -> str:
    """The Pyrula error behind `exc` if there is one (SDKs wrap transport errors), else `exc`."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (PyrulaError, OfflineViolation)):
            return f"{type(current).__name__}: {current}"
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return f"{type(exc).__name__}: {exc}"


# -- the flow --------------------------------------------------------------------------------------


def run_demo(store_path: str | os.PathLike[str]) -> DemoResult:
    """Record the four calls live against the stand-in, stop it, replay them with no network."""
    store = open_store(store_path)
    standin = StandIn()
    timings: dict[str, float] = {}
    standin.start()
    try:
        started = time.perf_counter()
        with pyrula.cassette(CASSETTE, mode="all", store=store) as recording:
            recorded = _make_calls(standin)
        timings["record"] = time.perf_counter() - started
        live_calls = standin.count()
    finally:
        standin.stop()

    replayed: list[Reply | None] = [None] * len(CALLS)
    replay_error: str | None = None
    replayed_count = 0
    started = time.perf_counter()
    try:
        with pyrula.cassette(CASSETTE, mode="none", store=store) as replaying:
            try:
                for index, call in enumerate(CALLS):
                    replayed[index] = call.run(standin, call.prompt)
            finally:
                replayed_count = replaying.stats.replayed
    # A miss or a blocked request (OfflineViolation, a BaseException so SDKs cannot bury it), a
    # parse error: report it, don't crash.
    except (Exception, OfflineViolation) as exc:
        replay_error = describe_error(exc)
    timings["replay"] = time.perf_counter() - started

    log = standin.log
    return DemoResult(
        store=Path(store_path),
        url=standin.url,
        stacks={
            sdk.__name__: f"{sdk.__name__} {sdk.__version__} over {stack_name(sdk)}"
            for sdk in (openai, anthropic)
        },
        calls=[
            CallResult(c.provider, c.call, c.streamed, c.style, rec, rep)
            for c, rec, rep in zip(CALLS, recorded, replayed, strict=True)
        ],
        live_calls=live_calls,
        replay_calls=len(log) - live_calls,
        log=log,
        recorded=recording.stats.recorded,
        replayed=replayed_count,
        replay_error=replay_error,
        elapsed_s=timings,
    )


# -- showing it ------------------------------------------------------------------------------------


def render(result: DemoResult, console: Console) -> None:
    """The table of calls and the counts, from the stand-in's own log."""
    console.print(
        f"[bold]pyrula demo[/]: stand-in provider at {result.url} (no key, no network); "
        + ", ".join(result.stacks.values())
    )
    table = Table(title=f"cassette {CASSETTE!r} in {result.store}", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("call")
    table.add_column("streamed")
    table.add_column("reply text", overflow="fold")
    table.add_column("replay")
    for number, call in enumerate(result.calls, start=1):
        if call.replayed is None:
            outcome = "[red]missing[/]"
        elif call.matches:
            outcome = "[green]identical[/]"
        else:
            outcome = f"[red]differs: {call.replayed.text!r}[/]"
        table.add_row(
            str(number),
            f"{call.provider} {call.call} ({call.style})",
            "yes" if call.streamed else "no",
            call.recorded.text,
            outcome,
        )
    console.print(table)

    paths = Counter(served.path for served in result.log)
    streamed = sum(1 for served in result.log if served.streamed)
    console.print(
        f"provider calls: {result.live_calls} live while recording, "
        f"{result.replay_calls} during replay",
        markup=False,
        highlight=False,
    )
    after = (
        "it was stopped before the replay and received nothing more"
        if result.replay_calls == 0
        else f"it received {result.replay_calls} more after recording ended"
    )
    console.print(
        f"stand-in log: {len(result.log)} requests ("
        + ", ".join(f"{n} x {path}" for path, n in sorted(paths.items()))
        + f"; {streamed} streamed); {after}",
        markup=False,
        highlight=False,
    )
    timing = ", ".join(f"{phase} {secs * 1000:.0f} ms" for phase, secs in result.elapsed_s.items())
    console.print(
        f"cassette {CASSETTE!r}: {result.recorded} recorded, {result.replayed} replayed offline "
        f"(network blocked); ids and texts identical: "
        f"{'yes' if all(c.matches for c in result.calls) else 'NO'} ({timing})",
        markup=False,
        highlight=False,
    )
    if result.replay_error:
        console.print(f"[red]replay failed:[/] {result.replay_error}", highlight=False)


def list_exchanges(store_path: str | os.PathLike[str], console: Console) -> None:
    """A short listing of the demo cassette's recorded exchanges."""
    exchanges = Exchanges(open_store(store_path))
    table = Table()
    for column in ("cassette", "surface", "request", "status", "streamed", "frames", "bytes"):
        table.add_column(column)
    for key, record in exchanges.scan(namespace_prefix(CASSETTE)):
        name, fingerprint, occurrence = split_key(key)
        path = "/" + record.url.split("://", 1)[-1].split("/", 1)[-1].split("?")[0]
        table.add_row(
            f"{name}/{fingerprint[:10]}#{occurrence}",
            record.surface,
            f"{record.method} {path}",
            str(record.status),
            "yes" if record.streamed else "no",
            str(record.frames),
            str(record.size),
        )
    console.print(table)


__all__ = [
    "CALLS",
    "CASSETTE",
    "CallResult",
    "DemoCall",
    "DemoResult",
    "Reply",
    "describe_error",
    "http_client",
    "list_exchanges",
    "render",
    "run_demo",
    "stack_name",
    "uses_httpx2",
]
