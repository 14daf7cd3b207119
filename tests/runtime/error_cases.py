"""Errors a body might catch around a step, each with the `except` clause that catches it.

Shared by the unit tests of error replay and by the workflow the SIGKILL test runs in a worker.
"""

from __future__ import annotations

from collections.abc import Callable


class Declined(Exception):
    """A user error whose constructor takes other arguments than its message."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class Outer:
    class Nested(LookupError):
        """Found by its qualified name, `Outer.Nested`."""


def raise_value() -> None:
    raise ValueError("bad amount")


def raise_key() -> None:
    raise {}["missing"]


def raise_declined() -> None:
    raise Declined(402, "card declined")


def raise_nested() -> None:
    raise Outer.Nested("no such order")


def raise_chained() -> None:
    try:
        raise_key()
    except KeyError as exc:
        raise RuntimeError("lookup failed") from exc


def raise_group() -> None:
    raise ExceptionGroup("two failed", [ValueError("a"), TypeError("b")])


def raise_local() -> None:
    class Local(Exception):
        pass

    raise Local("defined inside a function")


def branch_of(raiser: Callable[[], None]) -> str:
    """Run `raiser` and say which `except` clause caught it, as a body would branch."""
    try:
        raiser()
    except Declined as exc:
        return f"Declined code={exc.code} detail={exc.detail}"
    except Outer.Nested as exc:
        return f"Outer.Nested {exc}"
    except KeyError as exc:
        return f"KeyError {exc} args={exc.args}"
    except ValueError as exc:
        return f"ValueError {exc}"
    except ExceptionGroup as group:
        return "ExceptionGroup " + ",".join(type(e).__name__ for e in group.exceptions)
    except RuntimeError as exc:
        return f"RuntimeError {exc} cause={type(exc.__cause__).__name__}"
    except Exception as exc:
        return f"Exception {exc}"
    return "nothing raised"


CASES: dict[str, Callable[[], None]] = {
    "value": raise_value,
    "key": raise_key,
    "declined": raise_declined,
    "nested": raise_nested,
    "chained": raise_chained,
    "group": raise_group,
    "local": raise_local,
}
