"""Human-readable differences between two `compared` dicts, for replay-mismatch errors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from ._canonical import canonical_json

K = TypeVar("K")

# Lists whose items are tool definitions: matched by name, so a reorder or an insertion reads
# as what it is instead of every later index "changing".
_TOOL_LISTS = frozenset({"tools", "functions", "functionDeclarations", "function_declarations"})
# Where each provider nests a tool's name and its argument schema.
_TOOL_HOLDERS = ("function", "toolSpec")
_SCHEMA_FIELDS = frozenset(
    {"parameters", "input_schema", "inputSchema", "parametersJsonSchema", "schema", "json"}
)
_MAX_LINES = 25
_MAX_SHOWN = 60
_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$-]*$")
_OPAQUE = re.compile(r"^[A-Za-z0-9+/_=-]+$")  # long runs like this are encoded data: never shown


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """How `b` differs from `a` (recorded first, new second), one line per differing path."""
    lines = _differences(a, b)
    if len(lines) > _MAX_LINES:
        hidden = len(lines) - _MAX_LINES + 1
        lines = [*lines[: _MAX_LINES - 1], f"... and {hidden} more differences"]
    return lines


def nearest(
    target: Mapping[str, Any], candidates: Iterable[tuple[K, Mapping[str, Any]]]
) -> tuple[K, list[str]] | None:
    """The candidate whose compared dict differs from `target` in the fewest paths, with `diff`."""
    best: tuple[K, Mapping[str, Any]] | None = None
    best_count = 0
    for key, compared in candidates:
        count = len(_differences(compared, target))
        if best is None or count < best_count:
            best, best_count = (key, compared), count
            if count == 0:
                break
    if best is None:
        return None
    return best[0], diff(best[1], target)


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    _mapping(a, b, "", out)
    return out


def _same(a: Any, b: Any) -> bool:
    # `==` alone says True == 1 and [1] == [1.0]; the serialised form is what the digest hashes.
    return a == b and canonical_json(a) == canonical_json(b)


def _walk(a: Any, b: Any, path: str, out: list[str]) -> None:
    if _same(a, b):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if "$digest" in a or "$digest" in b:
            out.append(f"{path} changed (binary content differs)")
        else:
            _mapping(a, b, path, out)
    elif isinstance(a, list) and isinstance(b, list):
        if _key(path) in _TOOL_LISTS and _tools(a, b, path, out):
            return
        _sequence(a, b, path, out)
    else:
        out.append(f"{path} changed{_change(a, b)}")


def _mapping(a: Mapping[str, Any], b: Mapping[str, Any], path: str, out: list[str]) -> None:
    for name in sorted(a.keys() | b.keys()):
        where = _join(path, name)
        if name not in b:
            out.append(f"{where} removed")
        elif name not in a:
            out.append(f"{where} added")
        else:
            _walk(a[name], b[name], where, out)


def _sequence(a: list[Any], b: list[Any], path: str, out: list[str]) -> None:
    for index in range(min(len(a), len(b))):
        _walk(a[index], b[index], f"{path}[{index}]", out)
    extra = len(b) - len(a)
    if extra > 0:
        out.append(f"{path}: {extra} more item{'s' * (extra > 1)} ({len(b)} vs {len(a)})")
    elif extra < 0:
        out.append(f"{path}: {-extra} fewer item{'s' * (extra < -1)} ({len(b)} vs {len(a)})")


def _tools(a: list[Any], b: list[Any], path: str, out: list[str]) -> bool:
    """Diff two tool lists by tool name; False when the items cannot be keyed that way."""
    old, new = _by_label(a), _by_label(b)
    if old is None or new is None:
        return False
    lines: list[str] = []
    for index, (label, tool) in enumerate(new.items()):
        if label not in old:
            lines.append(f"{path}: `{label}` added")
        elif not _same(old[label], tool):
            if _name(tool) is None:  # a wrapper such as Gemini's {"functionDeclarations": [...]}
                _walk(old[label], tool, f"{path}[{index}]", lines)
            else:
                lines.append(f"{path}: `{label}` {_tool_change(old[label], tool)} changed")
    lines.extend(f"{path}: `{label}` removed" for label in old if label not in new)
    if not lines and list(old) != list(new):
        lines.append(f"{path}: order changed")
    out.extend(lines)
    return True


def _by_label(tools: list[Any]) -> dict[str, Any] | None:
    labelled: dict[str, Any] = {}
    for tool in tools:
        label = _label(tool)
        if label is None or label in labelled:
            return None
        labelled[label] = tool
    return labelled


def _name(tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return None
    for holder in (*(tool.get(name) for name in _TOOL_HOLDERS), tool):
        if isinstance(holder, dict) and isinstance(holder.get("name"), str):
            return str(holder["name"])
    return None


def _label(tool: Any) -> str | None:
    """A tool's name; failing that its type (`web_search`) or its one key (`cachePoint`)."""
    if (name := _name(tool)) is not None:
        return name
    if not isinstance(tool, dict):
        return None
    if isinstance(tool.get("type"), str):
        return str(tool["type"])
    if len(tool) == 1:
        return str(next(iter(tool)))
    return None


def _tool_change(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Which parts of one tool changed (`schema`, `description`, ...), looking inside the
    `function` / `toolSpec` wrapper where a provider has one."""
    fields: list[str] = []

    def note(name: str) -> None:
        label = "schema" if name in _SCHEMA_FIELDS else name
        if label not in fields:
            fields.append(label)

    for name in sorted(a.keys() | b.keys()):
        old, new = a.get(name), b.get(name)
        if _same(old, new):
            continue
        if name in _TOOL_HOLDERS and isinstance(old, dict) and isinstance(new, dict):
            for inner in sorted(old.keys() | new.keys()):
                if not _same(old.get(inner), new.get(inner)):
                    note(inner)
        else:
            note(name)
    return " and ".join(fields) if fields else "definition"


def _change(a: Any, b: Any) -> str:
    shown_a, shown_b = _show(a), _show(b)
    if shown_a is not None and shown_b is not None:
        return f" ({shown_a} -> {shown_b})"
    kind_a, kind_b = _kind(a), _kind(b)
    return f" ({kind_a} -> {kind_b})" if kind_a != kind_b else ""


def _show(value: Any) -> str | None:
    """A short inline rendering of a scalar, or None where showing it would not help."""
    if isinstance(value, dict | list):
        return None
    if isinstance(value, str) and len(value) > _MAX_SHOWN and _OPAQUE.match(value):
        return None
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "binary" if "$digest" in value else "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _join(path: str, name: str) -> str:
    if _IDENTIFIER.match(name):
        return f"{path}.{name}" if path else name
    return f"{path}[{json.dumps(name, ensure_ascii=False)}]"


def _key(path: str) -> str:
    """The key a path ends on (`tools` for `toolConfig.tools`); empty when it ends on an index."""
    return "" if path.endswith("]") else path.rpartition(".")[2]
