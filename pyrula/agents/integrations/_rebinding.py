"""Re-point a runnable the wrapped model built (`bind_tools`, `with_structured_output`) at the
journaled wrapper: the inner model's own helpers return bindings of the unwrapped model, whose
calls would skip the journal.

LangChain's runnables are pydantic models, so the walk reads their fields and copies each node
it changes; anything else is kept as it is.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def rebound(node: Any, old: Any, new: Any) -> Any:
    """`node` with every reference to `old` inside it replaced by `new`."""
    if node is old:
        return new
    if isinstance(node, list | tuple):
        items = [rebound(item, old, new) for item in node]
        changed = any(a is not b for a, b in zip(items, node, strict=True))
        return type(node)(items) if changed else node
    if isinstance(node, dict):
        values = {key: rebound(value, old, new) for key, value in node.items()}
        changed = any(values[key] is not node[key] for key in node)
        return values if changed else node
    if isinstance(node, BaseModel):
        updates: dict[str, Any] = {}
        for name in type(node).model_fields:
            value = getattr(node, name, None)
            if isinstance(value, type):
                continue
            replaced = rebound(value, old, new)
            if replaced is not value:
                updates[name] = replaced
        return node.model_copy(update=updates) if updates else node
    return node
