"""Which HTTP stack an SDK is built on, and an HTTP client for it over Pyrula's transport.

Kept apart from the demo flow so that a process needing only one SDK (the durable demo's worker)
does not import the other.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import httpx2

import pyrula


def uses_httpx2(sdk: ModuleType) -> bool:
    """Whether `sdk` (openai or anthropic) is built on httpx2 rather than httpx.

    Each SDK exports the HTTP client class it is built on as `DefaultHttpxClient` (a subclass of
    `httpx2.Client` in openai 3.x / anthropic 2.x, of `httpx.Client` before that). Failing that,
    its `_base_client` module imports the library it uses.
    """
    client_class = getattr(sdk, "DefaultHttpxClient", None)
    if isinstance(client_class, type):
        return issubclass(client_class, httpx2.Client)
    base = importlib.import_module(f"{sdk.__name__}._base_client")
    return hasattr(base, "httpx2")


def stack_name(sdk: ModuleType) -> str:
    return "httpx2" if uses_httpx2(sdk) else "httpx"


def http_client(sdk: ModuleType, *, sync: bool) -> Any:
    """The SDK's own default HTTP client class, with Pyrula's transport for its stack."""
    if uses_httpx2(sdk):
        transport: Any = pyrula.Httpx2Transport() if sync else pyrula.AsyncHttpx2Transport()
    else:
        transport = pyrula.HttpxTransport() if sync else pyrula.AsyncHttpxTransport()
    client_class: Any = sdk.DefaultHttpxClient if sync else sdk.DefaultAsyncHttpxClient
    return client_class(transport=transport)


__all__ = ["http_client", "stack_name", "uses_httpx2"]
