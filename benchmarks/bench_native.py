"""Per-turn overhead of the native agent loop against a bare httpx2 call to the same stand-in.

The stand-in is an in-process `httpx2.MockTransport` answering OpenAI chat completions: a
tool call (to a no-op tool) for each of `--turns - 1` turns, then a final answer. Variants, in
the same run, interleaved round by round:

* bare: `httpx2.AsyncClient.post` of the same JSON body and `json.loads` of the reply;
* client: `OpenAILLM.complete` outside any run (encode the neutral request, decode the reply);
* loop, live: one `Agent` run of `--turns` model turns, each with a journaled tool call,
  worked to its end on a fresh store (LMDB, fsync on): per model turn;
* loop, replay: a fork of that run replayed whole from the journal: per model turn;
* Pydantic AI: `pydantic_ai.Agent.run` of the same `--turns` turns with the same no-op tool,
  its OpenAI model over the openai SDK on the same stand-in (no journal): per model turn.
  Skipped when pydantic-ai is not installed (`pip install 'pyrula[pydantic-ai]' openai`).

Run: python benchmarks/bench_native.py [--rounds 5] [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from typing import Any

import httpx2

from pyrula.agents import Agent, OpenAILLM, tool
from pyrula.agents.llm import Message
from pyrula.journal.store import open_store
from pyrula.runtime import Worker, fork, submit

KEY = "sk-bench-" + "k" * 32


def _reply(request: httpx2.Request) -> httpx2.Response:
    body = json.loads(request.content)
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    limit = int(request.headers.get("x-turns", "0")) or 10**9
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if turn + 1 < limit and body.get("tools"):
        arguments = json.dumps({"n": turn})
        message["tool_calls"] = [
            {
                "id": f"c{turn}",
                "type": "function",
                "function": {"name": "noop", "arguments": arguments},
            }
        ]
    else:
        message["content"] = "done"
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-b",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-bench",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )


@tool
def noop(n: int) -> int:
    """Do nothing."""
    return n


class TurnsLLM(OpenAILLM):
    """Tells the stand-in how many turns the run should take."""

    turns = 0

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "x-turns": str(self.turns)}


async def bare(n: int) -> float:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(_reply))
    body = {"model": "gpt-bench", "messages": [{"role": "user", "content": "hi"}]}
    await client.post("http://bench.test/v1/chat/completions", content=json.dumps(body))  # warm
    start = time.perf_counter()
    for _ in range(n):
        reply = await client.post(
            "http://bench.test/v1/chat/completions",
            content=json.dumps(body),
            headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
        )
        json.loads(reply.content)
    return (time.perf_counter() - start) / n


async def client_only(n: int) -> float:
    model = OpenAILLM(
        "gpt-bench",
        api_key=KEY,
        base_url="http://bench.test/v1",
        transport=httpx2.MockTransport(_reply),
    )
    start = time.perf_counter()
    for _ in range(n):
        await model.complete([Message.user("hi")])
    return (time.perf_counter() - start) / n


def loop(turns: int, name: str) -> tuple[float, float]:
    model = TurnsLLM(
        "gpt-bench",
        api_key=KEY,
        base_url="http://bench.test/v1",
        transport=httpx2.MockTransport(_reply),
    )
    model.turns = turns
    agent = Agent(name=name, model=model, tools=[noop], max_turns=turns + 1)
    store = open_store(tempfile.mkdtemp(prefix="pyrula-bench-native-"))
    handle = submit(agent, "go", store=store)
    start = time.perf_counter()
    asyncio.run(Worker(store, poll_seconds=0.001).run(until_idle=True))
    live = (time.perf_counter() - start) / turns
    assert handle.record.status == "completed", handle.record.error
    copy = fork(handle.id, handle.events()[-1].seq, store=store)
    start = time.perf_counter()
    asyncio.run(Worker(store, poll_seconds=0.001).run(until_idle=True))
    replay = (time.perf_counter() - start) / turns
    assert copy.record.status == "completed"
    return live, replay


async def pydantic_ai_loop(turns: int) -> float | None:
    try:
        import openai
        from pydantic_ai import Agent as PAIAgent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
    except ImportError:
        return None
    client = openai.AsyncOpenAI(
        api_key=KEY,
        base_url="http://bench.test/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(_reply)),
        default_headers={"x-turns": str(turns)},
        max_retries=0,
    )
    model = OpenAIChatModel("gpt-bench", provider=OpenAIProvider(openai_client=client))
    pai = PAIAgent(model)

    def noop(n: int) -> int:
        """Do nothing."""
        return n

    # `@pai.tool_plain`, as a call (it registers the tool): pydantic-ai is optional here, and
    # where it is not installed mypy cannot read the decorator's types.
    pai.tool_plain(noop)

    await pai.run("go")  # warm: schemas and the connection are built once
    start = time.perf_counter()
    result = await pai.run("go")
    assert result.output == "done", result.output
    return (time.perf_counter() - start) / turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {
        "bare": [],
        "client": [],
        "live": [],
        "replay": [],
        "pydantic-ai": [],
    }
    for r in range(args.rounds):
        rows["bare"].append(asyncio.run(bare(args.turns)))
        rows["client"].append(asyncio.run(client_only(args.turns)))
        live, replay = loop(args.turns, f"bench-native-{r}")
        rows["live"].append(live)
        rows["replay"].append(replay)
        pai = asyncio.run(pydantic_ai_loop(args.turns))
        if pai is not None:
            rows["pydantic-ai"].append(pai)
    floor = statistics.median(rows["bare"])
    labels = {
        "bare": "bare httpx2 POST + json.loads",
        "client": "OpenAILLM.complete (no run)",
        "live": "Agent loop, live, per turn (+1 journaled tool call)",
        "replay": "Agent loop, replayed, per turn",
        "pydantic-ai": "Pydantic AI Agent.run, per turn (no journal)",
    }
    print(f"{'variant':58} {'median':>10} {'vs bare':>9}")
    for key, samples in rows.items():
        if not samples:
            print(f"{labels[key]:58} {'not installed':>10}")
            continue
        median = statistics.median(samples)
        print(f"{labels[key]:58} {median * 1e3:8.3f}ms {median / floor:8.1f}x")


if __name__ == "__main__":
    main()
