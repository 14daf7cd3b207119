"""Each framework's tests run in the nox leg that installs it (pinned); elsewhere they are not
collected. Each such leg sets its framework's variable (`PYRULA_REQUIRE_LANGCHAIN`,
`PYRULA_REQUIRE_PYDANTIC_AI`, `PYRULA_REQUIRE_OPENAI_AGENTS`), so a package missing there fails
the leg loudly instead of skipping its tests."""

from __future__ import annotations

import importlib.util
import os

# The variable a framework's leg sets: the modules the framework's tests import, and those tests.
FRAMEWORKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "PYRULA_REQUIRE_LANGCHAIN": (
        ("langchain_core", "langgraph", "langchain_openai", "langchain_anthropic"),
        (
            "test_chat_model.py",
            "test_docs.py",
            "test_graph_crash.py",
            "test_langgraph_node.py",
            "graph_app.py",
            "langchain_support.py",
        ),
    ),
    "PYRULA_REQUIRE_PYDANTIC_AI": (("pydantic_ai",), ("test_pydantic_ai.py",)),
    "PYRULA_REQUIRE_OPENAI_AGENTS": (("agents",), ("test_openai_agents.py",)),
}


def ignored() -> list[str]:
    """The files whose framework is not installed; raises where the leg requires it."""
    ignore: list[str] = []
    for variable, (modules, files) in FRAMEWORKS.items():
        missing = [name for name in modules if importlib.util.find_spec(name) is None]
        if missing and os.environ.get(variable):
            raise ImportError(
                f"{variable} is set, but this leg is missing {', '.join(missing)}: run it "
                "through nox (noxfile.py installs each leg's pinned packages), or unset it"
            )
        if missing:
            ignore.extend(files)
    return ignore


collect_ignore = ignored()
