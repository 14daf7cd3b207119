"""Helpers for testing agents and workflows in-process."""

from pyrula.agents.testing.runner import AgentRunner, Spend

__all__ = ["AgentRunner", "Spend"]
