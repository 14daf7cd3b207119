"""The guard: each call on a drop-in's resources, routed through its provider's surface table.

Inside a run a journaled call goes to the SDK untouched (the transport journals it, one position
per SDK call), a passed-through one runs with the run's journal bypassed, and a refused one
raises `UnjournaledSurface` before anything is sent. Outside a run every call passes through,
with a warning.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pyrula.agents.compat._surfaces import SurfaceTable, Verdict
from pyrula.errors import UnjournaledSurface
from pyrula.runtime.calls import current_run, passed_through, runs_bound

T = TypeVar("T")


def unchanged(client: Any, path: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The default `prepare`: a call's arguments as the caller gave them."""
    return kwargs


def no_refusal(client: Any) -> str | None:
    """The default `refuse_client`: every client can journal."""
    return None


def allowed_in_units(client: Any, path: str, kwargs: dict[str, Any]) -> str | None:
    """The default `unit_refusal`: inside a step or tool, every generation call is metered."""
    return None


# -- calls outside the run's context -----------------------------------------------------------

_warned: set[type] = set()
_warned_sites: set[tuple[str, int]] = set()


def _warn_unjournaled(client: Any) -> None:
    # Imported here: the transport stack loads with a client's first call, not with the drop-in.
    from pyrula.transport.core import current_session

    if current_session() is not None:
        return  # a cassette journals the call
    if runs_bound():
        # A run is executing in this process, but this call does not carry its context: a
        # thread started with threading/ThreadPoolExecutor/run_in_executor instead of the run's.
        caller = sys._getframe(2)
        site = (caller.f_code.co_filename, caller.f_lineno)
        if site not in _warned_sites:
            _warned_sites.add(site)
            warnings.warn(
                f"{type(client).__name__} was called on a thread that does not carry the run's "
                "context, so the call is not journaled and runs live again on every resume; "
                "start the thread with `await ctx.to_thread(fn)` or `ctx.map_threads(fn, items)`",
                RuntimeWarning,
                stacklevel=3,
            )
        return
    cls = type(client)
    if cls in _warned:
        return
    _warned.add(cls)
    warnings.warn(
        f"{cls.__name__} was called outside a Pyrula run, so its calls are not journaled; "
        "call it from an @agent or @workflow body to journal them",
        stacklevel=3,
    )


# -- the surface table, applied to one call ----------------------------------------------------


@dataclass(frozen=True)
class CallRoute:
    """What differs between drop-ins when `guarded_call` routes one call through a table."""

    table: SurfaceTable
    # The call, journaled: framed as one call, in a `rate_limit=` slot when the client has one.
    journaled: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any], Any, str], Any]
    # True when the request goes out on the calling thread (a sync client).
    blocking: Callable[[Any, str], bool]
    # Why a journaled call (its arguments, its tools) cannot be journaled in a run, else None.
    refusal: Callable[[Any, str, dict[str, Any]], str | None]
    # Whether an attribute of a resource is itself a resource (guarded in turn), not a value.
    is_resource: Callable[[Any], bool]
    # Adjusts a journaled call's arguments (client, path, kwargs) before it is sent.
    prepare: Callable[[Any, str, dict[str, Any]], dict[str, Any]] = unchanged
    # Why nothing on this client can be journaled in a run (anthropic's middleware), else None.
    refuse_client: Callable[[Any], str | None] = no_refusal
    # Why a generation call cannot run even inside a step or tool (one call hiding several
    # model requests behind one cap check: Gemini's automatic function calling), else None.
    unit_refusal: Callable[[Any, str, dict[str, Any]], str | None] = allowed_in_units


def guarded_call(
    fn: Callable[..., Any], path: str, client: Any, route: CallRoute
) -> Callable[..., Any]:
    """`fn` (the SDK method at `path`) as the surface table says it runs inside a run."""
    row = route.table.classify(path)
    journaled = row.verdict is Verdict.JOURNALED
    blocking = route.blocking(client, path)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        run = current_run()
        if not run.in_run:
            _warn_unjournaled(client)
            if journaled and getattr(client, "_pyrula_rate", None) is not None:
                return route.journaled(fn, args, kwargs, client, path)
            return fn(*args, **kwargs)
        if journaled:
            if blocking:
                run.refuse_loop_thread()  # before anything is sent, in a step or tool too
            kwargs = route.prepare(client, path, kwargs)
        if run.scope.within != "run":
            # In a step or tool the unit's result is durable: generation calls are metered by
            # the transport, everything else passes through.
            if journaled:
                refusal = route.unit_refusal(client, path, kwargs)
                if refusal is not None:
                    raise UnjournaledSurface(refusal)
                return route.journaled(fn, args, kwargs, client, path)
            return passed_through(fn, args, kwargs)
        refusal = route.refuse_client(client)
        if refusal is not None:
            raise UnjournaledSurface(f"`{path}` cannot be journaled in a run: {refusal}")
        if row.verdict is Verdict.REFUSED:
            raise UnjournaledSurface(
                f"`{path}` cannot be journaled in a run: its replay would call the provider "
                f"live again; {row.fix}"
            )
        if row.verdict is Verdict.PASSED_THROUGH:
            return passed_through(fn, args, kwargs)
        refusal = route.refusal(client, path, kwargs)
        if refusal is not None:
            raise UnjournaledSurface(refusal)
        return route.journaled(fn, args, kwargs, client, path)

    return call


# -- guarding a client's resources -------------------------------------------------------------


class Guard:
    """Stands in for one SDK resource; routes what is called on it through the surface table."""

    __slots__ = ("_pyrula_client", "_pyrula_path", "_pyrula_target")

    def __init__(self, target: Any, path: str, client: Any) -> None:
        self._pyrula_target = target
        self._pyrula_path = path
        self._pyrula_client = client

    def __getattr__(self, name: str) -> Any:
        path = f"{self._pyrula_path}.{name}"
        client = self._pyrula_client
        route: CallRoute = client._pyrula_route
        try:
            value = getattr(self._pyrula_target, name)
        except AttributeError:
            missing = None if name.startswith("_") else route.table.unavailable(path)
            if missing is None:
                raise
            raise missing from None
        if name.startswith("_"):
            return value
        if route.is_resource(value):
            return type(self)(value, path, client)
        if callable(value):
            return guarded_call(value, path, client, route)
        return value

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # `isinstance(guard, Messages)` holds, as SDK code that checks its resources expects
        # (google-genai's chats pick sync or async that way); `type(guard)` is still the guard.
        return type(self._pyrula_target)

    def __dir__(self) -> list[str]:
        return dir(self._pyrula_target)

    def __repr__(self) -> str:
        return f"<journaled {self._pyrula_path}: {self._pyrula_target!r}>"


def missing_surface(client: Any, name: str) -> AttributeError:
    """What a drop-in client raises for an attribute it lacks: `SurfaceUnavailable` when its
    table lists the surface (an SDK release older than the one that brought it)."""
    route: CallRoute | None = getattr(type(client), "_pyrula_route", None)
    missing = None if route is None or name.startswith("_") else route.table.unavailable(name)
    if missing is not None:
        return missing
    return AttributeError(f"{type(client).__name__!r} object has no attribute {name!r}")
