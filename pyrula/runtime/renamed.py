"""A deprecated attribute name kept for one release: reading or setting it warns, naming the
attribute that replaced it, and goes to that one."""

from __future__ import annotations

import warnings
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Renamed(Generic[T]):
    """`old = Renamed("new")` in a class body: `obj.old` is `obj.new`, with a DeprecationWarning."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.old = ""
        self.owner = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.old, self.owner = name, owner.__name__

    def _warn(self) -> None:
        warnings.warn(
            f"{self.owner}.{self.old} is deprecated and will be removed in a later release; "
            f"use {self.owner}.{self.new}",
            DeprecationWarning,
            stacklevel=3,
        )

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Renamed[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        self._warn()
        return getattr(obj, self.new)

    def __set__(self, obj: object, value: T) -> None:
        self._warn()
        setattr(obj, self.new, value)
