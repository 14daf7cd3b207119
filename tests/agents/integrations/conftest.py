"""Each framework's tests run in the nox leg that installs it (pinned); elsewhere they are not
collected."""

from __future__ import annotations

import importlib.util

_NEEDS = {"test_pydantic_ai.py": "pydantic_ai", "test_openai_agents.py": "agents"}

collect_ignore = [test for test, module in _NEEDS.items() if not importlib.util.find_spec(module)]
