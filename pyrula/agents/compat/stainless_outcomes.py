"""How a Stainless-built SDK (openai, anthropic) reports a call's outcome, for the call frame.

Shared by the drop-ins and by integrations whose framework holds such a client (LangChain's
`ChatOpenAI` and `ChatAnthropic`): both SDKs raise `APIConnectionError` / `APITimeoutError` for
transport failures and build their status errors with `_make_status_error_from_response`.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from pyrula.runtime.calls import ERROR_HEADERS, ReplayedFailure


def _connect_failure(exc: BaseException | None) -> bool:
    """A connection that was never made (so nothing was sent), on whichever stack is loaded."""
    for name in ("httpx2", "httpx"):
        lib = sys.modules.get(name)
        if lib is not None and isinstance(exc, (lib.ConnectError, lib.ConnectTimeout)):
            return True
    return False


def _stack_of(http_client: Any) -> Any:
    """The HTTP library (httpx2 or httpx) `http_client` is built on: its Request and Response."""
    for name in ("httpx2", "httpx"):
        lib = sys.modules.get(name)
        if lib is not None and isinstance(http_client, (lib.Client, lib.AsyncClient)):
            return lib
    raise TypeError(f"{type(http_client).__name__} is neither an httpx nor an httpx2 client")


class StainlessOutcomes:
    """Outcomes of a Stainless-built SDK's client (`pyrula.runtime.calls.Outcomes`); `sdk` is
    the SDK's module (`openai`, `anthropic`)."""

    __slots__ = ("_client", "_sdk")

    def __init__(self, client: Any, sdk: ModuleType) -> None:
        self._client = client
        self._sdk = sdk

    def sent_failure(self, exc: BaseException) -> dict[str, str] | None:
        """A connection failure after the request went out is the call's outcome."""
        if isinstance(exc, self._sdk.APIConnectionError) and not _connect_failure(exc.__cause__):
            return {"type": type(exc).__name__, "message": str(exc)}
        return None

    def rebuilt(self, replayed: ReplayedFailure) -> BaseException:
        """The SDK's own exception for a journaled error, on the client's HTTP stack."""
        client, sdk, record = self._client, self._sdk, replayed.record
        lib = _stack_of(client._client)
        request = lib.Request(record.method, record.url.split("?", 1)[0])
        failure = record.extra.get("failure")
        if isinstance(failure, dict):
            if failure.get("type") == sdk.APITimeoutError.__name__:
                return sdk.APITimeoutError(request=request)  # type: ignore[no-any-return]
            message = str(failure.get("message") or "Connection error.")
            return sdk.APIConnectionError(message=message, request=request)  # type: ignore[no-any-return]
        headers = [(k, v) for k, v in record.headers if k.lower() in ERROR_HEADERS]
        response = lib.Response(
            record.status, headers=headers, content=replayed.body, request=request
        )
        error = client._make_status_error_from_response(response)
        if not replayed.body:
            error.body = None  # not kept (too large), so not guessed at
        return error  # type: ignore[no-any-return]
