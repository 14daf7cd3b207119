"""Framework integrations: each loads its framework only when its name is first used."""

from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> the module (under this package) that defines it
_LAZY = {
    "PyrulaDurability": "pydantic_ai",
    "PyrulaRunHooks": "openai_agents",
    "use_journaled_client": "openai_agents",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
