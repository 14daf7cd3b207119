"""The replies table: a row per surface, the generic rules for the rest, and a pure package."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from pyrula.fingerprints import surfaces

from pyrula import replies
from pyrula.replies import RULES, generic, rules_for


def test_every_surface_has_its_own_row():
    assert set(RULES) == set(surfaces.ALL)
    for surface in surfaces.ALL:
        assert rules_for(surface).surface == surface


def test_an_unknown_surface_is_read_by_the_generic_rules():
    assert rules_for("") is generic.RULES
    assert rules_for("someone.else") is generic.RULES
    assert generic.RULES.sse_end is None and generic.RULES.eventstream_end is None


def test_generic_usage_reads_openai_chat_and_bedrock_shapes():
    chat = generic.usage([{"model": "m", "usage": {"prompt_tokens": 3, "completion_tokens": 2}}])
    converse = generic.usage([{"usage": {"inputTokens": 4, "outputTokens": 1}}])
    assert (chat.model, chat.input_tokens, chat.output_tokens) == ("m", 3, 2)
    assert (converse.input_tokens, converse.output_tokens) == (4, 1)


def test_the_package_imports_only_the_standard_library_and_fingerprints():
    """Pure: no journal, transport or runtime, so anything may read replies with it."""
    package = Path(replies.__file__).parent
    for module in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert name.startswith("pyrula.fingerprints") or (
                    top != "pyrula" and top in sys.stdlib_module_names | {"__future__"}
                ), f"{module.name} imports {name}"
