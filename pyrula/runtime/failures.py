"""A step's, tool's or run's failure as the journal keeps it, and as a replay raises it again.

A body that catches `ValueError` around `ctx.step(...)` must take the same branch after a
resume as it did live, so a journaled failure replays as its own class: found by module and
qualified name among the classes Python can import, rebuilt from its JSON-able `args` and
attributes, with its cause chain and, for an exception group, its members. Nothing is unpickled:
the store holds names and JSON values only, and a name is only followed to a `BaseException`
subclass. A class that cannot be found (one defined inside a function) or rebuilt replays as
`StepFailed`, which names the original class and is still an `Exception`.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from pyrula.errors import BudgetExceeded, LiveBudgetExceeded, StepFailed

# How deep a chain of causes (or nesting of groups) is kept: enough for any real chain.
_MAX_DEPTH = 8


def describe_error(exc: BaseException, *, capture: str = "io", _depth: int = 0) -> dict[str, Any]:
    """What the journal keeps of `exc`. Below the `io` capture level only its type (and a
    refusal's code) is kept: no message, no arguments, no attributes."""
    cls = type(exc)
    data: dict[str, Any] = {
        "type": cls.__name__,
        "module": cls.__module__,
        "qualname": cls.__qualname__,
    }
    if isinstance(exc, BudgetExceeded):
        data["code"] = exc.code
    if capture != "io":
        return data
    data["message"] = str(exc)
    if isinstance(exc, BudgetExceeded):
        data["limit"] = exc.limit
    if isinstance(exc, BaseExceptionGroup):
        data["group_message"] = exc.message
        if _depth < _MAX_DEPTH:
            data["exceptions"] = [describe_error(e, _depth=_depth + 1) for e in exc.exceptions]
    else:
        args = _json_or_none(list(exc.args))
        if args is not None:
            data["args"] = args
        attrs = {k: v for k, v in vars(exc).items() if not k.startswith("_")}
        kept = _json_or_none(attrs) if attrs else None
        if kept:
            data["attrs"] = kept
    cause = (
        exc.__cause__
        if exc.__cause__ is not None
        else (None if exc.__suppress_context__ else exc.__context__)
    )
    if cause is not None and _depth < _MAX_DEPTH:
        data["cause"] = describe_error(cause, _depth=_depth + 1)
        data["cause_explicit"] = exc.__cause__ is not None
    return data


def rebuild_error(error: dict[str, Any]) -> BaseException:
    """The exception a journaled failure replays as (see the module's docstring)."""
    rebuilt = _rebuild(error)
    cause = error.get("cause")
    if isinstance(cause, dict):
        chained = rebuild_error(cause)
        if error.get("cause_explicit", True):
            rebuilt.__cause__ = chained
        else:
            rebuilt.__context__ = chained
    return rebuilt


def error_class(error: dict[str, Any]) -> type[BaseException] | None:
    """The class a journaled error names, if this process can import it."""
    module = error.get("module")
    qualname = error.get("qualname") or error.get("type", "")
    if not module:  # journaled before classes were named in full: Pyrula's own, or a builtin
        from pyrula import errors

        module = "pyrula.errors" if hasattr(errors, qualname) else "builtins"
    if "<locals>" in qualname:
        return None
    found: Any = sys.modules.get(module)
    if found is None:
        try:
            found = importlib.import_module(module)
        except Exception:  # the module is gone, renamed, or fails to import here
            return None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, BaseException):
        return found
    return None


def _rebuild(error: dict[str, Any]) -> BaseException:
    message = str(error.get("message", ""))
    cls = error_class(error)
    if cls is BudgetExceeded or cls is LiveBudgetExceeded:
        return cls(message, limit=error.get("limit", ""), code=error.get("code", ""))
    if cls is not None and issubclass(cls, BaseExceptionGroup):
        group = _group(cls, error)
        if group is not None:
            return group
    elif cls is not None:
        built = _instance(cls, error)
        if built is not None:
            return built
    return StepFailed(
        str(error.get("type", "Exception")),
        message,
        module=str(error.get("module", "")),
        qualname=str(error.get("qualname", "")),
    )


def _instance(cls: type[BaseException], error: dict[str, Any]) -> BaseException | None:
    """`cls(*args)` when that gives back the same message; else the instance built without
    calling `__init__`, as pickle would (args and attributes set directly)."""
    args = error.get("args")
    if args is None:  # not kept (capture below io) or not JSON: the message is all there is
        args = [error["message"]] if error.get("message") else []
    message = error.get("message")
    try:
        built = cls(*args)
        if message is None or str(built) == message:
            _restore_attrs(built, error)
            return built
    except Exception:  # a constructor with other parameters: build it as pickle does
        pass
    try:
        built = cls.__new__(cls, *args)
        built.args = tuple(args)
    except Exception:  # a class whose __new__ insists on its own arguments
        return None
    _restore_attrs(built, error)
    return built


def _restore_attrs(built: BaseException, error: dict[str, Any]) -> None:
    for name, value in (error.get("attrs") or {}).items():
        try:
            setattr(built, name, value)
        except (AttributeError, TypeError):  # a read-only property of the class
            continue


def _group(cls: type[BaseException], error: dict[str, Any]) -> BaseException | None:
    members = [rebuild_error(e) for e in error.get("exceptions", []) if isinstance(e, dict)]
    if not members:
        return None
    if not all(isinstance(m, Exception) for m in members) and issubclass(cls, Exception):
        cls = BaseExceptionGroup
    try:
        return cls(str(error.get("group_message", "")), members)  # type: ignore[call-arg]
    except Exception:  # a group subclass with another constructor
        return None


def _json_or_none(value: Any) -> Any:
    """`value` if it survives JSON unchanged, else None (the store holds JSON only)."""
    try:
        return value if json.loads(json.dumps(value)) == value else None
    except (TypeError, ValueError):
        return None


__all__ = ["describe_error", "error_class", "rebuild_error"]
