"""The integrations package imports without LangChain or LangGraph, and a missing framework is
named with the extra that brings it."""

from __future__ import annotations

import subprocess
import sys

import pytest

_BLOCKED = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed
import pyrula.agents.integrations as integrations
try:
    getattr(integrations, {name!r})
except ImportError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("name", "blocked", "extra"),
    [
        ("durable_chat_model", ["langchain_core"], "pyrula[agents,langchain]"),
        ("as_langgraph_node", ["langgraph", "langgraph.types"], "pyrula[agents,langgraph]"),
    ],
)
def test_a_missing_framework_is_named_with_its_extra(name, blocked, extra):
    code = _BLOCKED.format(blocked=blocked, name=name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"pip install '{extra}'" in out.stdout, out.stdout + out.stderr


def test_importing_the_package_loads_neither_framework():
    code = (
        "import sys, pyrula.agents.integrations\n"
        "print([m for m in ('langchain_core', 'langgraph') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
