"""A package's names, each imported from its module on first use (PEP 562's module `__getattr__`).

A package lists where each of its lazy names lives and takes the two module hooks from here:

    __getattr__, __dir__ = lazy_exports(__name__, {"Worker": "pyrula.runtime.worker"})

so importing the package imports none of those modules until a name is asked for; the value is
then kept in the package, so later lookups are plain attribute reads. `import_extra` loads a
module whose package comes with an optional extra, naming the extra when the package is missing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from pyrula.errors import MissingExtra


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


def import_extra(module: str, extra: str, feature: str | None = None) -> ModuleType:
    """`module`, imported; when a package it needs is not installed, a `MissingExtra` naming
    `feature` (else the module) and the `extra` that brings the package. One of Pyrula's own
    modules missing is a broken install, raised as it is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("pyrula"):
            raise
        raise MissingExtra(feature or module, extra, (exc.name,)) from exc
