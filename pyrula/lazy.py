"""A package's names, each imported from its module on first use (PEP 562's module `__getattr__`).

A package lists where each of its lazy names lives and takes the two module hooks from here:

    __getattr__, __dir__ = lazy_exports(__name__, {"Worker": "pyrula.runtime.worker"})

so importing the package imports none of those modules until a name is asked for; the value is
then kept in the package, so later lookups are plain attribute reads.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`(__getattr__, __dir__)` for `package`: each name of `where` from the module it names."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *where])

    return __getattr__, __dir__
