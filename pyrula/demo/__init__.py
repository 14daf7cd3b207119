"""`pyrula demo`: real SDK calls recorded against a local stand-in provider, then replayed;
then a durable agent run whose worker process is SIGKILLed mid-run and resumed.

The stand-in needs nothing beyond the standard library. The demo flow (`pyrula.demo.run`, and
`pyrula.demo.durable` for the durable run) needs the openai and anthropic SDKs (`pip install
'pyrula[agents]'`), so it is imported on first use: importing this package, or running any other
`pyrula` command, never loads the SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrula.demo.standin import Received, Served, StandIn

if TYPE_CHECKING:
    from pyrula.demo.run import CallResult, DemoResult, Reply, run_demo

_LAZY = ("CallResult", "DemoResult", "Reply", "run_demo")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from pyrula.demo import run

        return getattr(run, name)
    raise AttributeError(f"module 'pyrula.demo' has no attribute {name!r}")


__all__ = ["CallResult", "DemoResult", "Received", "Reply", "Served", "StandIn", "run_demo"]
