"""Each framework's tests run in the nox leg that installs it (pinned); elsewhere they are not
collected. A LangChain leg sets `PYRULA_REQUIRE_LANGCHAIN`, so a package missing there fails
loudly instead of skipping."""

from __future__ import annotations

import importlib.util
import os

_LANGCHAIN = ("langchain_core", "langgraph", "langchain_openai", "langchain_anthropic")
_LANGCHAIN_MISSING = [name for name in _LANGCHAIN if importlib.util.find_spec(name) is None]
if _LANGCHAIN_MISSING and os.environ.get("PYRULA_REQUIRE_LANGCHAIN"):
    raise ImportError(f"the langchain leg is missing {', '.join(_LANGCHAIN_MISSING)}")

_LANGCHAIN_FILES = [
    "test_chat_model.py",
    "test_docs.py",
    "test_graph_crash.py",
    "test_langgraph_node.py",
    "graph_app.py",
    "langchain_support.py",
]
_NEEDS = {"test_pydantic_ai.py": "pydantic_ai", "test_openai_agents.py": "agents"}

collect_ignore = [test for test, module in _NEEDS.items() if not importlib.util.find_spec(module)]
if _LANGCHAIN_MISSING:
    collect_ignore += _LANGCHAIN_FILES
