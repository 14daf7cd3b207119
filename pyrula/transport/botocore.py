"""The botocore adapter: the journal core behind botocore's `before-send` event.

botocore has no transport to replace; it emits `before-send.<service>.<Operation>` with each
signed request (once per attempt) and sends nothing when a handler returns a response. So the
fifth adapter is a handler, registered on one client's own event emitter (other clients of the
same boto3 session are untouched). It asks the session the httpx adapters ask (the cassette or
run current where the call is made, or the one it is bound to) and either returns the recorded
reply as an `AWSResponse`, or sends the request itself through the client's own endpoint session
(its proxies, timeouts, TLS settings and pool) and tees the reply into the journal as botocore
reads it. With no session the handler returns None and botocore sends as usual.

Nothing of Pyrula imports this module until a client is journaled: botocore stays optional.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import botocore.exceptions
from botocore.awsrequest import AWSResponse
from botocore.client import BaseClient

from pyrula.errors import ProviderStreamTruncated
from pyrula.fingerprints import Canonical, joined_headers
from pyrula.transport.core import (
    Live,
    Recording,
    Replay,
    Session,
    current_session,
    plan_request,
)
from pyrula.transport.gates import gated, unsent

__all__ = ["BotocoreHook", "journal_botocore"]

T = TypeVar("T")
_HOOK_ID = "pyrula-journal"
_INSTALLED = "_pyrula_botocore_hook"


def _always() -> bool:
    return True


class BotocoreHook:
    """`before-send.<service>[.<Operation>]` of one client: what it returns replaces the send.

    `session` binds it to one cassette, else it follows the session current where the client
    is called. `journals` (default: always) says whether this send is journaled at all;
    `tees_errors` (default: always) whether an error reply (status 300 and up) is: a caller that
    journals a call's error itself, as the outcome botocore gives up on, passes False.
    """

    def __init__(
        self,
        client: Any,
        *,
        session: Session | None = None,
        journals: Callable[[], bool] = _always,
        tees_errors: Callable[[], bool] = _always,
    ) -> None:
        self._client = client
        self._session = session
        self._journals = journals
        self._tees_errors = tees_errors

    def __call__(self, request: Any, **kwargs: Any) -> AWSResponse | None:
        session = self._session or current_session()
        if session is None or not self._journals():
            return None
        headers = joined_headers((str(k), _text(v)) for k, v in request.headers.items())
        body = _body(request.body)
        plan, canonical = plan_request(
            session, request.method, request.url, headers, body, blocking=True
        )
        if isinstance(plan, Replay):
            return AWSResponse(request.url, plan.status, plan.headers, _ReplayedBody(plan.frames))
        assert isinstance(plan, Live) and canonical is not None  # only a replay has none
        plan = gated(plan, body, canonical)  # a case's live budget refuses here
        started = time.perf_counter()
        try:
            # The client's own endpoint session: its proxies, timeouts, TLS settings and pool.
            response = self._client._endpoint.http_session.send(request)
        except BaseException:
            unsent(plan)
            raise
        if response.status_code >= 300 and not self._tees_errors():
            unsent(plan)  # the caller journals the error itself: no sink hears of it
            return response
        return _teed(response, plan, canonical, started, streamed=bool(request.stream_output))


def journal_botocore(
    client: T, *, session: Session | None = None, hook: BotocoreHook | None = None
) -> T:
    """Journal every operation of a built boto3 (botocore) client, in place, and return it.

    Inside `pyrula.cassette(...)` its calls record and replay like an httpx SDK's; outside one
    they are sent as usual. The client stays the client it was (same object and class, your
    profile, region, `Config`); journaling it again changes nothing. `hook` (a drop-in's own)
    replaces the plain `BotocoreHook(client, session=session)` that is otherwise installed.
    """
    if not isinstance(client, BaseClient):
        raise TypeError(
            f"journal_botocore() takes a boto3 client, not {type(client).__name__}; build it "
            'with `boto3.client("<service>", ...)`'
        )
    if hook is None and vars(client).get(_INSTALLED) is not None:
        return client
    event = f"before-send.{client.meta.service_model.service_id.hyphenize()}"
    client.meta.events.unregister(event, unique_id=_HOOK_ID)
    installed = hook or BotocoreHook(client, session=session)
    client.meta.events.register(event, installed, unique_id=_HOOK_ID)
    setattr(client, _INSTALLED, installed)
    return client


def _text(value: str | bytes) -> str:
    # botocore encodes header values to bytes before it sends.
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    data = body.read()  # a file-like body: read it for the fingerprint, then rewind for sending
    body.seek(0)
    return data if isinstance(data, bytes) else str(data).encode("utf-8")


def _teed(
    response: AWSResponse, plan: Live, canonical: Canonical, started: float, *, streamed: bool
) -> AWSResponse:
    if plan.sink is None:
        return response
    headers = [(str(k), str(v)) for k, v in response.headers.items()]
    recording = Recording(canonical, response.status_code, headers, plan.sink, started)
    if not streamed:
        recording.feed(response.content)  # botocore already read the whole body
        recording.eof()
        return response
    response.raw = _TeedStream(response.raw, recording)
    return response


def _stream_broken(cause: BaseException) -> botocore.exceptions.ResponseStreamingError:
    return botocore.exceptions.ResponseStreamingError(error=cause)


class _TeedStream:
    """A live event-stream's raw urllib3 response, journaled as botocore's `EventStream` reads
    it. A stream that breaks mid-way raises `ResponseStreamingError`, and so does one the
    session journals as cut short (a run: the call's outcome), the same as its replay does."""

    def __init__(self, raw: Any, recording: Recording) -> None:
        self._raw = raw
        self._recording = recording

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        chunks = self._raw.stream(*args, **kwargs)
        try:
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except Exception as exc:  # urllib3's ProtocolError, ReadTimeoutError, ...
                    self._end(exc)
                    raise _stream_broken(exc) from exc
                self._recording.feed(chunk)
                yield chunk
            self._end(None)
        finally:
            if not self._recording.finished:  # the reader stopped early (or dropped the stream)
                self._recording.abandon()

    def _end(self, failure: BaseException | None) -> None:
        """The bytes stopped: a reply whole by its last event is kept; one cut short goes to
        the session's sink, which may raise."""
        try:
            self._recording.eof()
        except ProviderStreamTruncated as cut:
            raise _stream_broken(failure or cut) from cut

    def close(self) -> None:
        if not self._recording.finished:
            self._recording.abandon()
        self._raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _ReplayedBody:
    """The recorded reply, where botocore reads a live one (`raw.stream()`)."""

    def __init__(self, frames: Iterator[bytes]) -> None:
        self._frames = frames

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        try:
            yield from self._frames
        except ProviderStreamTruncated as cut:  # journaled cut short: raise as it did live
            raise _stream_broken(cut) from cut

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return b"".join(self.stream())

    def close(self) -> None:
        return None

    def release_conn(self) -> None:
        return None
