"""A zygote that forks real worker processes running the native trip agent, for the SIGKILL
trials: it imports everything once, so each forked worker starts in milliseconds and opens the
store fresh; killing it with SIGKILL is a real process death."""

from __future__ import annotations

import asyncio
import os
import sys

from tests.agents.native.support import build


def _worker(store: str, url: str, kind: str) -> None:
    from pyrula.runtime import Worker

    build(kind, url, suffix="-crash")
    asyncio.run(Worker(store, lease_seconds=30, poll_seconds=0.005).run(until_idle=True))


def _mcp_worker(store: str, url: str, script: str) -> None:
    from pyrula.agents import Agent, MCPServerStdio
    from pyrula.runtime import Worker
    from tests.fakes.agent_api import model_for

    effects = {"MCP_EFFECTS": os.environ.get("MCP_EFFECTS", os.devnull)}
    server = MCPServerStdio(sys.executable, [script], env=effects)
    Agent(name="mcp-crash", model=model_for("openai", base_url=url), mcp_servers=[server])
    asyncio.run(Worker(store, lease_seconds=30, poll_seconds=0.005).run(until_idle=True))


def zygote() -> None:
    """Commands on stdin: `fork STORE URL KIND` (or `fork mcp STORE URL SCRIPT`) prints a worker
    pid; `reap PID` its exit status."""
    for line in sys.stdin:
        command, *arguments = line.split()
        if command == "fork":
            pid = os.fork()
            if pid == 0:
                try:
                    (_mcp_worker if arguments[0] == "mcp" else _worker)(*arguments[-3:])
                    os._exit(0)
                except BaseException:
                    os._exit(1)
            print(pid, flush=True)
        elif command == "reap":
            _, status = os.waitpid(int(arguments[0]), 0)
            print(status, flush=True)


if __name__ == "__main__":
    zygote()
