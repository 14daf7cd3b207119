"""The examples of docs/langchain.md and docs/langgraph.md that run offline run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _offline_examples(page: str) -> list[str]:
    # The offline examples are the blocks that run something (`asyncio.run`).
    return [b for b in _BLOCK.findall((ROOT / "docs" / page).read_text()) if "asyncio.run" in b]


@pytest.mark.parametrize("page", ["langchain.md", "langgraph.md"])
def test_the_offline_examples_run(page):
    examples = _offline_examples(page)
    assert examples
    for code in examples:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
