"""What a surface-table row promises inside a run, checked the same way for every drop-in."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic

from pyrula.agents import AgentContext, UnjournaledSurface, agent
from pyrula.runtime import answer
from tests.runtime.support import drive, new_store, run_to_rest


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
