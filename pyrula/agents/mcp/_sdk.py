"""The `mcp` SDK side: the high-level server of either major (`FastMCP` on 1.x, `MCPServer` on
2.x), one handler per served tool, and the stdio and streamable HTTP transports."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from pyrula.agents.mcp._calls import CallOptions, cancel_run, outcome, start
from pyrula.agents.mcp._tools import ServedTool
from pyrula.errors import (
    IdempotencyConflict,
    JournalRefusal,
    MissingExtra,
    ToolServerUnavailable,
)
from pyrula.journal.async_store import acall

_CONTEXT_PARAM = "pyrula_mcp_context"
# Where `run_http(auth=...)` leaves the principal it accepted, in the ASGI scope.
IDENTITY_SCOPE_KEY = "pyrula.mcp.identity"

Callback = Callable[[Any], Any]


def sdk() -> tuple[type[Any], type[Any], type[Exception], int]:
    """(server class, its Context class, its ToolError, the SDK's major version)."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(
            "build_mcp_server",
            "agents",
            (exc.name,),
            needs="the mcp SDK",
            alternative="pip install 'mcp>=1.24,<3'",
        ) from exc
    # Looked up by name: each major lacks the other's module, and mypy sees only one.
    try:
        v2 = importlib.import_module("mcp.server.mcpserver")
        errors = importlib.import_module("mcp.server.mcpserver.exceptions")
        return v2.MCPServer, v2.Context, errors.ToolError, 2
    except ImportError:
        v1 = importlib.import_module("mcp.server.fastmcp")
        errors = importlib.import_module("mcp.server.fastmcp.exceptions")
        return v1.FastMCP, v1.Context, errors.ToolError, 1


def _meta_value(meta: Any, name: str) -> Any:
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return meta.get(name)
    extra = getattr(meta, "model_extra", None) or {}
    return extra.get(name, getattr(meta, name, None))


def idempotency_key_of(ctx: Any) -> str | None:
    """The client's `_meta.idempotency_key` (never the JSON-RPC id: ids restart per session)."""
    key = _meta_value(ctx.request_context.meta, "idempotency_key")
    return None if key is None else str(key)


def identity_of(ctx: Any) -> str:
    """Who is calling: what `run_http(auth=...)` accepted, else the SDK's authenticated client,
    else `"anonymous"` (stdio: the one local client)."""
    request = getattr(ctx.request_context, "request", None)
    scope = getattr(request, "scope", None) or {}
    if scope.get(IDENTITY_SCOPE_KEY):
        return str(scope[IDENTITY_SCOPE_KEY])
    try:
        from mcp.server.auth.middleware.auth_context import get_access_token
    except ImportError:  # pragma: no cover - both majors ship it
        return "anonymous"
    token = get_access_token()
    return str(token.client_id) if token is not None else "anonymous"


def _cancel_notified(ctx: Any) -> bool:
    """Whether the handler is being cancelled because the client sent `notifications/cancelled`
    (the run is cancelled too) rather than because it went away (the run keeps going)."""
    request_context = ctx.request_context
    session = getattr(request_context, "session", None)
    in_flight = getattr(session, "_in_flight", None)  # mcp 1.x: the session's responders
    if isinstance(in_flight, dict):
        responder = in_flight.get(request_context.request_id)
        return bool(responder is not None and getattr(responder, "_completed", False))
    # mcp 2.x: the request's dispatch context sets an event when the peer cancels it.
    outbound = getattr(session, "_request_outbound", None)
    event = getattr(outbound, "cancel_requested", None)
    return bool(event is not None and event.is_set())


def _handler(
    served: ServedTool,
    store: Any,
    options: CallOptions,
    idempotency_from_request: Callback | None,
    identity_from_request: Callback | None,
    context_class: type[Any],
    tool_error: type[Exception],
) -> Callable[..., Any]:
    async def handler(**kwargs: Any) -> Any:
        ctx = kwargs.pop(_CONTEXT_PARAM)
        arguments = kwargs
        try:
            key = (idempotency_from_request or idempotency_key_of)(ctx)
            identity = (identity_from_request or identity_of)(ctx)
            # Submitted off the event loop (on a store thread for PostgreSQL), as the waits are.
            handle = await acall(
                store,
                start,
                store,
                served,
                _as_json(arguments),
                identity=str(identity),
                key=None if key is None else str(key),
            )
        except (IdempotencyConflict, ToolServerUnavailable) as exc:
            raise tool_error(_describe(exc)) from exc
        try:
            return await outcome(handle, served, options)
        except anyio.get_cancelled_exc_class():
            if _cancel_notified(ctx):
                await cancel_run(store, handle.id)
            raise
        except (Exception, JournalRefusal) as exc:  # cancelled or over budget: BaseExceptions
            raise tool_error(_describe(exc)) from exc

    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in served.parameters]
    context = inspect.Parameter(
        _CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=context_class
    )
    handler.__signature__ = inspect.Signature([*parameters, context])  # type: ignore[attr-defined]
    handler.__annotations__ = {
        p.name: p.annotation for p in [*parameters, context] if p.annotation is not p.empty
    }
    handler.__name__ = served.name
    handler.__doc__ = served.description
    return handler


def _as_json(arguments: dict[str, Any]) -> dict[str, Any]:
    from pydantic import TypeAdapter

    converted: dict[str, Any] = TypeAdapter(dict[str, Any]).dump_python(arguments, mode="json")
    return converted


def _describe(exc: BaseException) -> str:
    """A tool's own error as `Type: message`; Pyrula's own failure says it is Pyrula's."""
    name = type(exc).__name__
    if isinstance(exc, ToolServerUnavailable):
        return f"Pyrula could not run this tool call ({name}): {exc}"
    return f"{name}: {exc}"


def build_sdk_server(
    name: str,
    served: list[ServedTool],
    store: Any,
    options: CallOptions,
    idempotency_from_request: Callback | None,
    identity_from_request: Callback | None,
    **server_kwargs: Any,
) -> Any:
    """The SDK's own high-level server with a handler per tool, each advertising the tool's
    input schema as the SDK derives it from the Python signature."""
    server_class, context_class, tool_error, _major = sdk()
    from mcp.types import ToolAnnotations

    server = server_class(name, **server_kwargs)
    for one in served:
        annotations = (
            ToolAnnotations.model_validate({"readOnlyHint": True})
            if one.definition.read_only
            else None
        )
        server.add_tool(
            _handler(
                one,
                store,
                options,
                idempotency_from_request,
                identity_from_request,
                context_class,
                tool_error,
            ),
            name=one.name,
            description=one.description or None,
            annotations=annotations,
            structured_output=False,
        )
    return server
