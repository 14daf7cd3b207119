"""A trip-planning agent for the native tests: two tools with logged side effects, a sub-agent,
a structured output, on any of the four providers (or an OpenAI-compatible host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pydantic

from pyrula.agents import Agent, ToolContext, tool
from pyrula.runtime import RunStore
from tests.fakes.agent_api import calls, model_for, text

KINDS = ("openai", "anthropic", "gemini", "bedrock", "compatible")


class Trip(pydantic.BaseModel):
    city: str
    temperature: int
    advice: str


FINAL = {"city": "Oslo", "temperature": 4, "advice": "bring a coat"}


def main_turns(kind: str, suffix: str = "", *, advisor: bool = True) -> list[Any]:
    """The trip agent's script: two tools in parallel, one more, the sub-agent, the answer."""
    asked = [calls((f"advisor-{kind}{suffix}", {"prompt": "Oslo at 4 degrees?"}))]
    return [
        calls(("lookup", {"city": "Paris"}), ("weather", {"city": "Paris"})),
        calls(("weather", {"city": "Oslo"})),
        *(asked if advisor else []),
        text(json.dumps(FINAL)),
    ]


SUB_TURNS = [text("bring a coat")]


def provider_of(kind: str) -> str:
    return "openai" if kind == "compatible" else kind


def effects_log() -> str:
    return os.environ.get("NATIVE_EFFECTS", os.devnull)


def _effect(ctx: ToolContext, line: str) -> None:
    # A tool that takes a moment, so a SIGKILL can land inside it.
    time.sleep(float(os.environ.get("NATIVE_TOOL_SECONDS", "0")))
    with open(effects_log(), "a") as log:
        log.write(f"{ctx.tool_call_id} {line}\n")
        log.flush()
        os.fsync(log.fileno())


@tool
def lookup(ctx: ToolContext, city: str) -> dict[str, Any]:
    """Look a city up."""
    _effect(ctx, f"lookup {city}")
    return {"city": city, "country": {"Paris": "France", "Oslo": "Norway"}.get(city, "?")}


@tool
def weather(ctx: ToolContext, city: str) -> int:
    """Today's temperature in a city, in degrees Celsius."""
    _effect(ctx, f"weather {city}")
    return {"Paris": 12, "Oslo": 4}.get(city, 20)


def build(
    kind: str,
    base_url: str,
    *,
    stand_in: Any = None,
    sub_stand_in: Any = None,
    suffix: str = "",
    advisor: bool = True,
) -> Agent:
    """The trip agent for `kind`, its model at `base_url` and its sub-agent at `base_url/sub`."""
    provider = provider_of(kind)
    if kind == "compatible":
        base_url = f"{base_url}/openai/v1"
    sub = Agent(
        name=f"advisor-{kind}{suffix}",
        model=model_for(provider, stand_in=sub_stand_in, base_url=f"{base_url}/sub"),
        instructions="Give one piece of travel advice.",
        description="Ask the travel advisor.",
    )
    return Agent(
        name=f"trip-{kind}{suffix}",
        model=model_for(provider, stand_in=stand_in, base_url=base_url),
        instructions="Plan the trip.",
        tools=[lookup, weather, sub] if advisor else [lookup, weather],
        output_type=Trip,
    )


def llm_done(journal: RunStore, run_id: str) -> int:
    return sum(
        1 for e in journal.events(run_id) if e.type == "llm:done" and e.payload.get("position")
    )


ROOT = Path(__file__).parents[3]


class Zygote:
    """Forks real worker processes (tests/agents/native/crash_app.py) on demand."""

    def __init__(self, effects: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "NATIVE_EFFECTS": str(effects),
            "NATIVE_TOOL_SECONDS": "0.01",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.agents.native.crash_app"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, line: str) -> int:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        self.process.kill()
        with self.process:  # closes its stdin and stdout pipes, then waits
            pass
