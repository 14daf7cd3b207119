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


def zygote() -> None:
    """Commands on stdin: `fork STORE URL KIND` prints a worker pid; `reap PID` its status."""
    for line in sys.stdin:
        command, *arguments = line.split()
        if command == "fork":
            pid = os.fork()
            if pid == 0:
                try:
                    _worker(*arguments)
                    os._exit(0)
                except BaseException:
                    os._exit(1)
            print(pid, flush=True)
        elif command == "reap":
            _, status = os.waitpid(int(arguments[0]), 0)
            print(status, flush=True)


if __name__ == "__main__":
    zygote()
