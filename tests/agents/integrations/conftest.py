"""The integration tests need LangChain, LangGraph, langchain-openai and langchain-anthropic,
which only the `langchain` nox legs install; the stack legs skip this folder. A leg that sets
`PYRULA_REQUIRE_LANGCHAIN` fails loudly instead when one is missing."""

from __future__ import annotations

import importlib.util
import os

_NEEDED = ("langchain_core", "langgraph", "langchain_openai", "langchain_anthropic")
_MISSING = [name for name in _NEEDED if importlib.util.find_spec(name) is None]

if _MISSING and os.environ.get("PYRULA_REQUIRE_LANGCHAIN"):
    raise ImportError(f"the langchain leg is missing {', '.join(_MISSING)}")

collect_ignore_glob = ["test_*.py", "graph_app.py", "support.py"] if _MISSING else []
