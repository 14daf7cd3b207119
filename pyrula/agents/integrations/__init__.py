"""Framework integrations, journaled inside runs: LangChain chat models and LangGraph nodes,
Pydantic AI's durability capability, and the OpenAI Agents SDK's journaled client and hooks.

`from pyrula.agents.integrations import durable_chat_model, as_langgraph_node, PyrulaDurability`.
Each name loads its framework on first use, so this package imports without any of them
installed; a missing one is named with the extra that brings it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrula.lazy import import_extra

if TYPE_CHECKING:  # what IDEs and type checkers see; at run time each loads on first use
    from pyrula.agents.integrations.chat_model import DurableChatModel, durable_chat_model
    from pyrula.agents.integrations.langgraph_node import as_langgraph_node
    from pyrula.agents.integrations.openai_agents import PyrulaRunHooks, use_journaled_client
    from pyrula.agents.integrations.pydantic_ai import PyrulaDurability

__all__ = [
    "DurableChatModel",
    "PyrulaDurability",
    "PyrulaRunHooks",
    "as_langgraph_node",
    "durable_chat_model",
    "use_journaled_client",
]

# Name -> (module, the extra that brings its framework).
_LAZY: dict[str, tuple[str, str]] = {
    "durable_chat_model": ("chat_model", "agents,langchain"),
    "DurableChatModel": ("chat_model", "agents,langchain"),
    "as_langgraph_node": ("langgraph_node", "agents,langgraph"),
    "PyrulaDurability": ("pydantic_ai", "agents,pydantic-ai"),
    "PyrulaRunHooks": ("openai_agents", "agents"),
    "use_journaled_client": ("openai_agents", "agents"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, extra = _LAZY[name]
    return getattr(import_extra(f"{__name__}.{module}", extra, name), name)
