"""What is current where a request is made: the session deciding it (`core`), and the gate a
live send is held to (`gates`).

Each is a context variable, so concurrent tasks and threads that carry their caller's context
see their own; and a process-wide stack beside it, so a thread started without the caller's
context (an SDK's worker thread, say) still finds the innermost one pushed.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Generic, TypeVar

T = TypeVar("T")


class Current(Generic[T]):
    """One kind of current thing: `push` it for a block, `get` it anywhere inside."""

    def __init__(self, name: str) -> None:
        self._var: ContextVar[T | None] = ContextVar(name, default=None)
        self._stack: list[T] = []

    def get(self) -> T | None:
        return self._var.get() or (self._stack[-1] if self._stack else None)

    def push(self, item: T, *, process_wide: bool = True) -> object:
        """Make `item` current in this context; `process_wide` also for context-less threads."""
        if process_wide:
            self._stack.append(item)
        return self._var.set(item)

    def pop(self, item: T, token: object) -> None:
        """End `push`'s block: `token` is what it returned."""
        self._var.reset(token)  # type: ignore[arg-type]
        if item in self._stack:
            self._stack.remove(item)


__all__ = ["Current"]
