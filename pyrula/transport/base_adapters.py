"""What the four transports share: httpx and httpx2, sync and async, a thin type translation of
the core.

httpx2 is a fork of httpx with the same shapes under another module, so one set of helpers is
written against "the library" and each adapter names which library it serves: `SyncAdapter` and
`AsyncAdapter` here, each pair's classes in a module of its own (`httpx_adapters`,
`httpx2_adapters`), which builds on this one. `adapters.py`, above them, is where the public
names are looked up.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any, NamedTuple

from pyrula.fingerprints import Canonical
from pyrula.transport.core import (
    Fed,
    Live,
    Offload,
    Recording,
    Replay,
    Session,
    Sink,
    aplan_request,
    current_session,
    header_bytes,
    offload_of,
    plan_request,
)
from pyrula.transport.gates import gated, unsent

_REPLAY_EXTENSIONS = {"http_version": b"HTTP/1.1", "reason_phrase": b""}


def _request_parts(request: Any) -> tuple[str, str, Any, bytes]:
    # The stack's own Headers: already a case-insensitive mapping, so no copy per request.
    return request.method, str(request.url), request.headers, request.content


class _Streams(NamedTuple):
    """One library's byte stream classes, each an instance of its own stream base classes."""

    sync_frames: type  # a replayed reply's frames
    async_frames: type
    sync_tee: type  # a live reply, recorded as it passes
    async_tee: type
    sync_sent: type  # a live request's body, telling its sink once it left whole
    async_sent: type


def _stream_classes(lib: ModuleType) -> _Streams:

    class SyncFrames(lib.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, frames: Iterator[bytes]) -> None:
            self._frames = frames

        def __iter__(self) -> Iterator[bytes]:
            return self._frames

    class AsyncFrames(lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, frames: Iterator[bytes]) -> None:
            self._frames = frames

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if isinstance(self._frames, Fed):  # its sink's calls made off the loop
                async for frame in self._frames:
                    yield frame
                return
            for frame in self._frames:
                yield frame

    class SyncTee(lib.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, recording: Recording) -> None:
            self._inner = inner
            self._recording = recording

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._inner:
                data = self._recording.feed(chunk)
                if data:
                    yield data
            tail = self._recording.eof()
            if tail:
                yield tail

        def close(self) -> None:
            if not self._recording.finished:
                self._recording.abandon()
            self._inner.close()

    class AsyncTee(lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(
            self, inner: Any, recording: Recording, offload: Offload | None = None
        ) -> None:
            self._inner = inner
            self._recording = recording
            self._offload = offload

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                data = self._recording.feed(chunk)
                await self._delivered()
                if data:
                    yield data
            tail = self._recording.eof()
            await self._delivered()
            if tail:
                yield tail

        async def _delivered(self) -> None:
            # The sink's calls (a journal write) held back by the recording, made off the loop
            # and awaited, so the reader still gets the chunk only once its reply is committed.
            for call in self._recording.take_deferred():
                if self._offload is None:
                    call()
                else:
                    await self._offload(call)

        async def aclose(self) -> None:
            if not self._recording.finished:
                self._recording.abandon()
                await self._delivered()
            await self._inner.aclose()

    class SyncSent(lib.SyncByteStream):  # type: ignore[name-defined,misc]
        """A request body that tells its sink once the last byte was handed to the network."""

        def __init__(self, inner: Any, sink: Sink) -> None:
            self._inner = inner
            self._sink: Sink | None = sink

        def __iter__(self) -> Iterator[bytes]:
            yield from self._inner
            if self._sink is not None:  # once, though a connection retry sends it again
                sink, self._sink = self._sink, None
                sink.sent()

    class AsyncSent(lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, sink: Sink) -> None:
            self._inner = inner
            self._sink: Sink | None = sink

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                yield chunk
            if self._sink is not None:
                sink, self._sink = self._sink, None
                sink.sent()

    return _Streams(SyncFrames, AsyncFrames, SyncTee, AsyncTee, SyncSent, AsyncSent)


# Each library's stream classes, made the first time an adapter of that library is built.
_STREAMS: dict[ModuleType, _Streams] = {}


def _streams(lib: ModuleType) -> _Streams:
    found = _STREAMS.get(lib)
    if found is None:
        found = _STREAMS[lib] = _stream_classes(lib)
    return found


class Adapter:
    """What every journaling transport shares (`adapters.JournalTransport` names it for
    `isinstance`)."""

    _lib: ModuleType

    def __init__(self, inner: Any = None, *, session: Session | None = None) -> None:
        self._inner = inner
        self._session = session
        self._streams = _streams(self._lib)

    def _replayed(self, plan: Replay, request: Any, *, sync: bool) -> Any:
        stream = (self._streams.sync_frames if sync else self._streams.async_frames)(plan.frames)
        try:
            return self._lib.Response(
                plan.status,
                headers=plan.headers,
                stream=stream,
                request=request,
                extensions=_REPLAY_EXTENSIONS,
            )
        except UnicodeEncodeError:  # a value that is not ASCII: the HTTP stack takes bytes
            return self._lib.Response(
                plan.status,
                headers=header_bytes(plan.headers),
                stream=stream,
                request=request,
                extensions=_REPLAY_EXTENSIONS,
            )

    def _teed(
        self, response: Any, plan: Live, canonical: Canonical, started: float, *, sync: bool
    ) -> Any:
        if plan.sink is None:
            return response
        headers = list(response.headers.multi_items())
        offload = None if sync else offload_of(plan.sink)
        recording = Recording(
            canonical, response.status_code, headers, plan.sink, started, deferred=bool(offload)
        )
        if sync:
            tee = self._streams.sync_tee(response.stream, recording)
        else:
            tee = self._streams.async_tee(response.stream, recording, offload)
        # The SDK gets the headers as they came (bytes: a value need not be ASCII).
        raw = list(response.headers.raw)
        if recording.decodes:
            # The tee hands the SDK the body decoded, as a replay does (it is stored decoded):
            # the SDK sees the same headers live and replayed, without the transfer's coding
            # and length (google-genai exposes them in `sdk_http_response.headers`).
            raw = [(k, v) for k, v in raw if k.decode("latin-1").lower() not in _CODING_HEADERS]
        return self._lib.Response(
            response.status_code,
            headers=raw,
            stream=tee,
            request=response.request if _has_request(response) else None,
            extensions=response.extensions,
        )


_CODING_HEADERS = frozenset({"content-encoding", "content-length"})


def _has_request(response: Any) -> bool:
    try:
        response.request  # noqa: B018 - raises when the transport set none
    except RuntimeError:
        return False
    return True


class SyncAdapter(Adapter):
    def handle_request(self, request: Any) -> Any:
        session = self._session or current_session()
        if session is None:
            return self._inner_transport().handle_request(request)
        request.read()
        plan, canonical = plan_request(session, *_request_parts(request), blocking=True)
        if isinstance(plan, Replay):
            return self._replayed(plan, request, sync=True)
        assert isinstance(plan, Live) and canonical is not None  # only a replay has none
        plan = gated(plan, request.content, canonical)  # a case's live budget refuses here
        inner = self._inner_transport()
        started = time.perf_counter()
        body = request.stream
        if plan.sink is not None:  # the sink works on its record while the provider does
            request.stream = self._streams.sync_sent(body, plan.sink)
        try:
            response = inner.handle_request(request)
        except BaseException:
            unsent(plan)
            raise
        finally:
            request.stream = body
        return self._teed(response, plan, canonical, started, sync=True)

    def _inner_transport(self) -> Any:
        if self._inner is None:
            self._inner = self._lib.HTTPTransport()
        return self._inner

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()


class AsyncAdapter(Adapter):
    async def handle_async_request(self, request: Any) -> Any:
        session = self._session or current_session()
        if session is None:
            return await self._inner_transport().handle_async_request(request)
        await request.aread()
        plan, canonical = await aplan_request(session, *_request_parts(request))
        if isinstance(plan, Replay):
            return self._replayed(plan, request, sync=False)
        assert isinstance(plan, Live) and canonical is not None  # only a replay has none
        plan = gated(plan, request.content, canonical)
        inner = self._inner_transport()
        started = time.perf_counter()
        body = request.stream
        if plan.sink is not None:
            request.stream = self._streams.async_sent(body, plan.sink)
        try:
            response = await inner.handle_async_request(request)
        except BaseException:
            unsent(plan)
            raise
        finally:
            request.stream = body
        return self._teed(response, plan, canonical, started, sync=False)

    def _inner_transport(self) -> Any:
        if self._inner is None:
            self._inner = self._lib.AsyncHTTPTransport()
        return self._inner

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
