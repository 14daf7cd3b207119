"""A step's or tool's failure as the journal keeps it, and as a replay raises it again."""

from __future__ import annotations

from typing import Any

from pyrula.errors import BudgetExceeded


def rebuild_error(error: dict[str, Any]) -> BaseException:
    """The exception a journaled failure replays as: Pyrula's own types exactly, others by name."""
    from pyrula import errors

    kind = error.get("type", "Exception")
    message = error.get("message", "")
    if kind == "BudgetExceeded":
        return BudgetExceeded(message, limit=error.get("limit", ""), code=error.get("code", ""))
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        try:
            return cls(message)
        except TypeError:
            pass
    return StepFailed(kind, message)


class StepFailed(Exception):
    """A step or tool failed on an earlier attempt; its journaled error, replayed."""

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        super().__init__(f"{type_name}: {message}")


def describe_error(exc: BaseException) -> dict[str, Any]:
    data: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, BudgetExceeded):
        data.update(limit=exc.limit, code=exc.code)
    return data
