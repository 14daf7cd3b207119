"""The in-process stand-in provider: a MockTransport of the SDK's own HTTP stack that answers
from a reply function and logs every request that reached the "provider".

Reply builders per provider live beside it (`openai_api`, `anthropic_api`, `gemini_api`,
`bedrock_api`); a real socket server on 127.0.0.1 is `server.Server`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import httpx
import httpx2

import pyrula


def _stack(sdk: str, httpx2_from: int) -> Any:
    """The HTTP library the installed `sdk` sends through (SDK-FACTS.md)."""
    return httpx2 if int(version(sdk).split(".")[0]) >= httpx2_from else httpx


OPENAI_LIB: Any = _stack("openai", 3)
ANTHROPIC_LIB: Any = _stack("anthropic", 2)
GENAI_LIB: Any = _stack("google-genai", 3)

TEST_KEY = "sk-test-planted-secret-0123456789abcdef"

Reply = tuple[int, dict[str, str], list[bytes]]


def journal_transport(lib: Any, inner: Any, *, is_async: bool = False, **kw: Any) -> Any:
    """Pyrula's journaling transport for `lib`, wrapping `inner`."""
    if lib is httpx2:
        cls = pyrula.AsyncHttpx2Transport if is_async else pyrula.Httpx2Transport
    else:
        cls = pyrula.AsyncHttpxTransport if is_async else pyrula.HttpxTransport
    return cls(inner, **kw)


def json_reply(payload: Any, status: int = 200) -> Reply:
    return status, {"content-type": "application/json"}, [json.dumps(payload).encode()]


def sse_reply(frames: list[bytes]) -> Reply:
    return 200, {"content-type": "text/event-stream"}, frames


@dataclass
class Upstream:
    """A scripted provider: `reply(request) -> (status, headers, frames)`, each frame sent as its
    own chunk. The log: `requests` as they came, `calls` their JSON bodies, `headers_seen` their
    headers, and `seen` each one as "METHOD /path" without the first of `prefixes` it starts
    with (the API version)."""

    lib: Any
    reply: Callable[[Any], Reply]
    prefixes: tuple[str, ...] = ("/v1",)
    requests: list[Any] = field(default_factory=list)
    calls: list[Any] = field(default_factory=list)
    headers_seen: list[dict[str, str]] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)

    def handler(self, request: Any) -> Any:
        path = request.url.path
        cut = next((p for p in self.prefixes if path.startswith(p)), "")
        self.requests.append(request)
        self.calls.append(json.loads(request.content) if request.content else None)
        self.headers_seen.append(dict(request.headers))
        self.seen.append(f"{request.method} {path.removeprefix(cut)}")
        status, headers, frames = self.reply(request)
        lib = self.lib

        class Frames(lib.SyncByteStream, lib.AsyncByteStream):  # type: ignore[misc,name-defined]
            def __iter__(self) -> Iterator[bytes]:
                yield from frames

            async def __aiter__(self):  # type: ignore[no-untyped-def]
                for frame in frames:
                    yield frame

        return lib.Response(status, headers=headers, stream=Frames())

    def transport(self) -> Any:
        return self.lib.MockTransport(self.handler)

    def http_client(self, *, is_async: bool = False, journal: dict[str, Any] | None = None) -> Any:
        """An HTTP client of `lib` sending here; through Pyrula's transport unless `journal` is
        None (its items are that transport's keyword arguments)."""
        transport = self.transport()
        if journal is not None:
            transport = journal_transport(self.lib, transport, is_async=is_async, **journal)
        return (self.lib.AsyncClient if is_async else self.lib.Client)(transport=transport)


def sdk_client(
    upstream: Upstream,
    sync_cls: type,
    async_cls: type,
    base_url: str,
    *,
    is_async: bool = False,
    cls: Any = None,
    journaled: bool = True,
    api_key: str = TEST_KEY,
    max_retries: int = 2,
    **kw: Any,
) -> Any:
    """An SDK client sending to `upstream`: the SDK's own (`sync_cls`, or `async_cls` when
    `is_async`) over Pyrula's transport, or `cls` (a drop-in, say) over a plain one when not
    `journaled`; `kw` go to the client."""
    is_async = is_async or (cls is not None and issubclass(cls, async_cls))
    cls = cls or (async_cls if is_async else sync_cls)
    http = upstream.http_client(is_async=is_async, journal={} if journaled else None)
    return cls(api_key=api_key, base_url=base_url, http_client=http, max_retries=max_retries, **kw)


def ask(text: str) -> list[dict[str, str]]:
    """The `messages` of one user turn."""
    return [{"role": "user", "content": text}]
