"""`pyrula demo`: real SDK calls recorded against a local stand-in provider, then replayed."""

from pyrula.demo.run import CallResult, DemoResult, Reply, run_demo
from pyrula.demo.standin import Served, StandIn

__all__ = ["CallResult", "DemoResult", "Reply", "Served", "StandIn", "run_demo"]
