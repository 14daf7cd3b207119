"""The Amazon Bedrock drop-in: the boto3 `bedrock-runtime` client you built, journaled in place.

`journaled_bedrock(client)` leaves the client a boto3 client (your profile, region and `Config`)
and changes two things on that one instance:

- each operation method is replaced by a guard that applies the surface table below inside a
  run: `converse` / `converse_stream` run as one journaled call (one journal position, botocore's
  retries included, its final error journaled), a passed-through operation runs untouched, a
  refused one raises `UnjournaledSurface` before anything is signed or sent;
- the botocore adapter (`pyrula.transport.botocore`) is installed on the client: inside a run
  it answers a journaled call with its recorded reply (nothing sent), or sends a live one itself
  through the client's own endpoint session, teeing the reply into the journal.

Inside `pyrula.cassette(...)` every call records and replays as an httpx SDK's does; outside a
run and a cassette every call passes through untouched.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from pyrula.errors import MissingExtra

try:
    import botocore.exceptions
    from botocore.client import BaseClient
except ModuleNotFoundError as missing:  # the bedrock extra is not installed
    raise MissingExtra(
        "the Bedrock drop-in", "agents,bedrock", (missing.name,), needs="boto3"
    ) from missing

from pyrula.agents.compat._frames import framed
from pyrula.agents.compat._guard import CallRoute, guarded_call
from pyrula.agents.compat._rate_slots import RateCall
from pyrula.agents.compat._registry import register_converter
from pyrula.agents.compat._surfaces import Surface, SurfaceTable, Verdict
from pyrula.runtime.calls import BEDROCK as BEDROCK_KEY
from pyrula.runtime.calls import LLMRate, ReplayedFailure, current_run
from pyrula.transport.botocore import BotocoreHook, journal_botocore

__all__ = ["TABLE", "journaled_bedrock"]

T = TypeVar("T")
J, P, R = Verdict.JOURNALED, Verdict.PASSED_THROUGH, Verdict.REFUSED

SERVICE = "bedrock-runtime"
_USE_CONVERSE = "use `converse` (or `converse_stream`), whose replies a run journals"
_IN_A_STEP = "or call it inside `ctx.step` or a `@tool`, whose result is journaled"

# Read it against the spec's "Amazon Bedrock (boto3)" section row by row. A path is the method
# name the caller writes after `client.`; an operation a newer boto3 adds is refused until it is
# classified here.
TABLE = SurfaceTable(
    rows=(
        Surface("converse", J),
        Surface("converse_stream", J),
        # Not generation (or not billed as one): a resume sends them again.
        Surface("count_tokens", P, since="1.40.14"),
        Surface("apply_guardrail", P),
        Surface("get_async_invoke", P),
        Surface("list_async_invokes", P),
        Surface("invoke_model", R, f"{_USE_CONVERSE}, {_IN_A_STEP}"),
        Surface("invoke_model_with_response_stream", R, f"use `converse_stream`, {_IN_A_STEP}"),
        Surface("invoke_model_with_bidirectional_stream", R, f"{_USE_CONVERSE}, {_IN_A_STEP}"),
        Surface("start_async_invoke", R, f"an async job cannot be replayed; {_IN_A_STEP[3:]}"),
    ),
    unlisted={
        "": Surface(
            "",
            R,
            f"this boto3 release has it but the drop-in has not classified it yet; {_USE_CONVERSE}",
        )
    },
    sdk="boto3",
)


def _missing_operation(name: str, **kwargs: Any) -> None:
    """botocore's `getattr` event, for an operation the table lists but this botocore release
    predates: `SurfaceUnavailable` names the release that brought it."""
    missing = TABLE.unavailable(name)
    if missing is not None:
        raise missing


# `toolConfig.tools` entries: your own tools, and the one server tool that only reads.
_CLIENT_TOOL_KINDS = frozenset({"toolSpec", "cachePoint"})
ALLOWED_SYSTEM_TOOLS = frozenset({"nova_grounding"})
_REFUSED_TOOL = (
    "cannot be journaled in a run: Bedrock's servers run it, and a replay cannot undo or "
    "repeat what it did; declare a `toolSpec` tool and run the call yourself in `ctx.step` or "
    "a `@tool`"
)

# Set around a journaled operation's call: in a run its `before-send` journals only then, so a
# method captured before `journaled_bedrock` (or botocore's own calls) sends as usual.
_in_call: ContextVar[bool] = ContextVar("pyrula_bedrock_call", default=False)


# -- converting the client -------------------------------------------------------------------


def journaled_bedrock(client: T, *, rate_limit: LLMRate | None = None) -> T:
    """Journal a built boto3 `bedrock-runtime` client's `converse` and `converse_stream` inside
    a run (and every call inside a cassette), in place, and return it; with `rate_limit`, each
    live call waits for a slot."""
    if type(client).__module__.split(".")[0] == "instructor":
        raise TypeError(
            "journaled() was handed an instructor client, whose calls would skip the journal; "
            "pass the boto3 client first: "
            "`instructor.from_bedrock(journaled(client), mode=instructor.Mode.BEDROCK_TOOLS)`"
        )
    if not isinstance(client, BaseClient) or client.meta.service_model.service_name != SERVICE:
        service = client.meta.service_model.service_name if isinstance(client, BaseClient) else ""
        raise TypeError(
            f"journaled() takes a boto3 `bedrock-runtime` client, not "
            f"{f'a {service!r} client' if service else type(client).__name__}; build it with "
            '`boto3.client("bedrock-runtime", ...)`'
        )
    client._pyrula_rate = rate_limit  # type: ignore[attr-defined]
    if vars(client).get("_pyrula_journaled"):
        return client
    for name in client.meta.method_to_api_mapping:
        method = getattr(client, name, None)  # botocore models some it builds no method for
        if method is not None:
            setattr(client, name, guarded_call(method, name, client, _ROUTE))
    # An operation this botocore release predates: botocore asks its `getattr` event first.
    for row in TABLE.rows:
        client.meta.events.register(
            f"getattr.{SERVICE}.{row.path}", functools.partial(_missing_operation, row.path)
        )
    # Inside a run only a guarded call journals, and its error replies are not teed: the call's
    # outcome is what `_Outcomes` journals once botocore gives up. In a cassette every send is.
    hook = BotocoreHook(
        client,
        journals=lambda: current_run().attempt is None or _in_call.get(),
        tees_errors=lambda: current_run().attempt is None,
    )
    journal_botocore(client, hook=hook)
    client._pyrula_journaled = True  # type: ignore[attr-defined]
    return client


# -- the surface table, applied to one call --------------------------------------------------


def _journaled(
    method: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    client: Any,
    name: str,
) -> Any:
    with _calling():  # the `before-send` hook journals only inside a guarded call
        operation = client.meta.method_to_api_mapping[name]
        return _limited(client, name, operation, method, args, kwargs)


# boto3 blocks, and its operations are methods of the client itself: no nested resources.
_ROUTE = CallRoute(
    table=TABLE,
    journaled=_journaled,
    blocking=lambda client, name: True,
    refusal=lambda client, name, kwargs: _refused_tool(name, kwargs),
    is_resource=lambda value: False,
)


def _limited(
    client: Any,
    name: str,
    operation: str,
    method: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """One journaled call (botocore's retries share its position), in a `rate_limit=` slot."""
    rate = RateCall.of(client, BEDROCK_KEY, kwargs, streamed=name == "converse_stream")
    outcomes = _Outcomes(client, operation)
    return framed(method, args, kwargs, outcomes, blocking=True, rate=rate)


def _refused_tool(name: str, kwargs: dict[str, Any]) -> str | None:
    config = kwargs.get("toolConfig")
    tools = config.get("tools") if isinstance(config, dict) else None
    for tool in tools if isinstance(tools, list) else ():
        kinds = set(tool) if isinstance(tool, dict) else set()
        if kinds <= _CLIENT_TOOL_KINDS:
            continue
        if kinds == {"systemTool"}:
            system_tool = tool["systemTool"]
            tool_name = system_tool.get("name") if isinstance(system_tool, dict) else None
            if tool_name in ALLOWED_SYSTEM_TOOLS:
                continue
            return f"`{name}` with the systemTool {tool_name!r} {_REFUSED_TOOL}"
        return f"`{name}` with a tool of kind {sorted(kinds)} {_REFUSED_TOOL}"
    return None


@contextlib.contextmanager
def _calling() -> Iterator[None]:
    token = _in_call.set(True)
    try:
        yield
    finally:
        _in_call.reset(token)


# -- one SDK call, one journal position: its outcome, errors included ------------------------


class _Outcomes:
    """botocore's outcomes of one journaled operation (see `pyrula.runtime.calls.Outcomes`)."""

    __slots__ = ("_client", "_operation")

    def __init__(self, client: Any, operation: str) -> None:
        self._client = client
        self._operation = operation

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None:
        """A service error, or a failure after the request went out (a read timeout, a dropped
        connection). One before it left (ParamValidationError, no credentials or region, no
        connection made) is not journaled, so a resume runs it live."""
        if isinstance(exc, botocore.exceptions.ClientError):
            return {"type": "ClientError", "response": json.dumps(_kept_error(exc.response))}
        if isinstance(exc, botocore.exceptions.HTTPClientError):
            # botocore's connect failures (EndpointConnectionError, ConnectTimeoutError,
            # SSLError, ProxyConnectionError) derive from its `ConnectionError` instead.
            return {"type": type(exc).__name__, "message": str(exc)}
        return None

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException:
        return _rebuilt(self._client, self._operation, replayed)


def _kept_error(response: dict[str, Any]) -> dict[str, Any]:
    """The parsed error as a replay rebuilds it: everything but the reply's headers."""
    metadata = {k: v for k, v in response.get("ResponseMetadata", {}).items() if k != "HTTPHeaders"}
    return {**response, "ResponseMetadata": metadata}


def _rebuilt(client: Any, operation: str, replayed: ReplayedFailure) -> Exception:
    """botocore's own exception for a journaled failure: the modelled `ClientError` subclass
    (`client.exceptions.ThrottlingException` still matches), or the transport error's class."""
    record = replayed.record
    failure = record.extra.get("failure")
    failure = failure if isinstance(failure, dict) else {}
    if failure.get("type") == "ClientError":
        response = json.loads(str(failure.get("response")))
        response["ResponseMetadata"].setdefault("HTTPHeaders", {})
        code = response.get("Error", {}).get("Code")
        error: Exception = client.exceptions.from_code(code)(response, operation)
        return error
    message = str(failure.get("message", f"journaled failure at status {record.status}"))
    cls = getattr(botocore.exceptions, str(failure.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, botocore.exceptions.HTTPClientError)):
        cls = botocore.exceptions.HTTPClientError
    rebuilt: Exception = cls(endpoint_url=record.url, error=message)
    return rebuilt


register_converter("botocore.client", journaled_bedrock)
