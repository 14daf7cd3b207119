"""The Gemini drop-in's surface table, row by row, over a stand-in provider."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest
from google.genai import types

from pyrula.agents import AgentContext, UnjournaledSurface, agent
from pyrula.agents.compat._genai_surfaces import GENAI, SURFACES
from tests.agents.compat.support import arrives_later, assert_unavailable, park_and_resume
from tests.fakes.gemini_api import MODEL, make_client, upstream
from tests.runtime.support import run_to_rest

_MEDIA = (
    "generate_images",
    "edit_image",
    "upscale_image",
    "generate_videos",
    "recontext_image",
    "segment_image",
)
_READS = ("embed_content", "count_tokens", "compute_tokens", "get", "list", "update", "delete")
_SIDE_ROWS: dict[str, str] = {
    "models.generate_content": "journaled",
    "models.generate_content_stream": "journaled",
    "batches.create": "journaled",
    "batches.create_embeddings": "journaled",
    "tunings.tune": "journaled",
    **{f"models.{name}": "passed through" for name in _READS},
    "batches": "passed through",
    "tunings": "passed through",
    "caches": "passed through",
    "files": "passed through",
    "file_search_stores": "passed through",
    "operations": "passed through",
    "auth_tokens": "passed through",
    **{f"models.{name}": "refused" for name in _MEDIA},
    "interactions": "refused",
    "agents": "refused",
    "triggers": "refused",
}
# The spec's table, typed out independently of `_genai_surfaces.SURFACES`.
EXPECTED: dict[str, str] = {
    **{f"{side}{path}": v for side in ("", "aio.") for path, v in _SIDE_ROWS.items()},
    "aio.live": "refused",
}

_CONTENTS = "Ping?"
_GEN = {"model": MODEL, "contents": _CONTENTS}
_BATCH = {"model": MODEL, "src": [{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}]}
_EMBED_BATCH = {
    "model": "text-embedding-004",
    "src": {"inlined_requests": {"contents": [{"parts": [{"text": "hi"}]}]}},
}
_TUNE = {
    "base_model": MODEL,
    "training_dataset": types.TuningDataset(
        examples=[types.TuningExample(text_input="a", output="b")]
    ),
}

# One call per row that sends something: (what the caller writes after `client.`, arguments).
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "models.generate_content": ("models.generate_content", _GEN),
    "models.generate_content_stream": ("models.generate_content_stream", _GEN),
    "batches.create": ("batches.create", _BATCH),
    "batches.create_embeddings": ("batches.create_embeddings", _EMBED_BATCH),
    "tunings.tune": ("tunings.tune", _TUNE),
    "models.embed_content": ("models.embed_content", {"model": "e", "contents": "hi"}),
    "models.count_tokens": ("models.count_tokens", _GEN),
    "models.get": ("models.get", {"model": MODEL}),
    "batches": ("batches.get", {"name": "batches/b1"}),
    "tunings": ("tunings.get", {"name": "tunedModels/t1"}),
    "caches": ("caches.get", {"name": "cachedContents/c1"}),
    "files": ("files.get", {"name": "files/f1"}),
    **{f"models.{m}": (f"models.{m}", {}) for m in _MEDIA},
    "interactions": ("interactions.create", {}),
    "agents": ("agents.create", {}),
    "triggers": ("triggers.create", {}),
}
ROWS = [f"{side}{path}" for side in ("", "aio.") for path in CALLS] + ["aio.live"]


def test_the_table_is_the_spec_table():
    assert {row.path: row.verdict.value for row in SURFACES} == EXPECTED


@pytest.mark.parametrize(
    ("path", "verdict"),
    [
        ("models.generate_videos_later", "refused"),  # new under `models`: refused until classified
        ("aio.models.something_new", "refused"),
        ("webhooks.list", "passed through"),  # new elsewhere: one more non-generation surface
        ("aio.live.music.connect", "refused"),
        ("chats.create", "passed through"),
    ],
)
def test_an_unlisted_path_takes_its_parents_default(path, verdict):
    assert GENAI.classify(path).verdict.value == verdict


def _target(client: Any, dotted: str) -> Any:
    target = client
    for name in dotted.split("."):
        target = getattr(target, name)
    return target


async def invoke(client: Any, path: str, kwargs: dict[str, Any], ctx: AgentContext) -> Any:
    """Call `path` the way a caller would: the sync client on a thread of the run, `aio` awaited,
    and a stream read to its end."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK's "experimental" warnings
        if path.startswith("aio."):
            result = _target(client, path)(**kwargs)
            if inspect.isawaitable(result):
                result = await result
            if path.endswith("_stream"):
                return [chunk async for chunk in result]
            return result

        def sync() -> Any:
            result = _target(client, path)(**kwargs)
            return list(result) if path.endswith("_stream") else result

        return await ctx.to_thread(sync)


def _call_for(row: str) -> tuple[str, dict[str, Any]]:
    if row == "aio.live":
        return "aio.live.connect", {"model": MODEL}
    side = "aio." if row.startswith("aio.") else ""
    call, kwargs = CALLS[row.removeprefix("aio.")]
    return side + call, kwargs


@pytest.mark.parametrize("row", ROWS)
def test_surface_row_in_a_run(row):
    verdict = EXPECTED[row]
    call, kwargs = _call_for(row)
    stub = upstream()
    since = arrives_later(GENAI, row)
    if since:  # the installed google-genai predates this surface: the drop-in names the release
        assert_unavailable(make_client(stub), call, since)
        return
    if verdict == "refused":
        caught: list[BaseException] = []

        @agent(name=f"genai_refused_{row}")
        async def refused(ctx: AgentContext) -> None:
            try:
                result = _target(make_client(stub), call)(**kwargs)
                if inspect.isawaitable(result):
                    await result
                else:  # aio.live.connect is an async context manager
                    async with result:
                        pass
            except UnjournaledSurface as exc:
                caught.append(exc)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_to_rest(refused)
        assert stub.seen == [] and len(caught) == 1
        assert f"`{call}`" in str(caught[0])
        return

    async def body(ctx: AgentContext) -> None:
        client = make_client(stub)
        await invoke(client, call, kwargs, ctx)
        # The next journaled call shows whether the one above took a journal position.
        await client.aio.models.generate_content(model="gemini-after", contents=_CONTENTS)

    handle = park_and_resume(body, f"genai_row_{row}")
    done = [e.payload for e in handle.events() if e.type == "llm:done"]
    if verdict == "journaled":
        assert len(stub.seen) == 2, stub.seen  # both calls once; the resume sent nothing
        assert len(done) == 2 and all(d["position"] for d in done)
    else:
        assert len(stub.seen) == 3, stub.seen  # the passthrough ran again on resume
        assert stub.seen[0] == stub.seen[2] and stub.seen[1].endswith(
            "gemini-after:generateContent"
        )
        assert [d["position"] for d in done] == ["main/llm0"]
