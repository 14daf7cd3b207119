"""The journaling transports over a real socket: a live request's sink hears that the request
left whole before its reply begins, and a recording whose request side was made then is the one
made at the reply's end."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import httpx2
import pytest
from pyrula.fingerprints import Canonical, RequestParts

import pyrula
from pyrula.journal import Exchanges, Store
from pyrula.journal.recorder import Reply
from pyrula.transport import (
    AsyncHttpx2Transport,
    AsyncHttpxTransport,
    Httpx2Transport,
    HttpxTransport,
)
from pyrula.transport.core import Live, Plan
from tests.fakes.openai_api import upstream
from tests.fakes.provider import TEST_KEY
from tests.fakes.server import Server, serving

STACKS: dict[str, tuple[Any, type, type]] = {
    "httpx": (httpx, HttpxTransport, AsyncHttpxTransport),
    "httpx2": (httpx2, Httpx2Transport, AsyncHttpx2Transport),
}
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Logged:
    """A session that sends every request live, to a sink that notes each call in order."""

    cap = 0

    def __init__(self) -> None:
        self.calls: list[str] = []

    def plan(self, parts: RequestParts, canonical: Canonical, *, blocking: bool) -> Plan:
        return Live(self)

    def sent(self) -> None:
        self.calls.append("sent")

    def began(self) -> None:
        self.calls.append("began")

    def complete(self, reply: Reply) -> None:
        self.calls.append("complete")

    def abandon(self, reply: Reply) -> None:
        self.calls.append("abandon")

    def truncated(self, reply: Reply) -> None:
        self.calls.append("truncated")


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_sink_hears_the_request_left_once_before_the_reply(stack):
    lib, sync_type, async_type = STACKS[stack]
    session = Logged()
    with Server(serving(upstream().reply)) as server:
        url = f"{server.url}/v1/chat/completions"
        with lib.Client(transport=sync_type(session=session)) as client:
            assert client.post(url, json=BODY).status_code == 200

        async def post() -> int:
            async with lib.AsyncClient(transport=async_type(session=session)) as client:
                return (await client.post(url, json=BODY)).status_code

        assert asyncio.run(post()) == 200
    assert session.calls == ["sent", "began", "complete"] * 2


def _recorded(store: Store) -> list[tuple[Any, ...]]:
    """Each recording's key, request document, sent digest and reply body."""
    exchanges = Exchanges(store)
    found = []
    for key, record in exchanges.scan():
        body = b"".join(exchanges.frames(*exchanges.get(key)))  # type: ignore[misc]
        found.append((key, exchanges.request(record), record.extra.get("sent"), body))
    return found


def test_a_record_whose_request_was_made_while_the_provider_worked_is_the_same(tmp_path):
    # The reply echoes the key: the secrets found early are masked in it all the same.
    def echo(request: Any) -> Any:
        status, headers, _ = upstream().reply(request)
        return status, headers, [echoed]

    headers = {"authorization": f"Bearer {TEST_KEY}"}
    echoed = json.dumps({"echo": headers["authorization"]}).encode()
    with Server(serving(echo)) as server:
        url = f"{server.url}/v1/chat/completions"
        early = pyrula.Store(tmp_path / "over-a-socket")
        with (
            httpx.Client(transport=pyrula.HttpxTransport()) as client,
            pyrula.cassette("c", store=early),
        ):
            client.post(url, json=BODY, headers=headers)
        # The same exchange over a transport that never says the request left.
        mock = httpx.MockTransport(lambda request: httpx.Response(200, content=echoed))
        late = pyrula.Store(tmp_path / "mock")
        with (
            httpx.Client(transport=pyrula.HttpxTransport(mock)) as client,
            pyrula.cassette("c", store=late),
        ):
            client.post(url, json=BODY, headers=headers)
    (recorded,) = _recorded(early)
    assert _recorded(late) == [recorded]
    assert recorded[2] is not None  # the sent digest, made with the rest of the request side
    assert TEST_KEY.encode() not in recorded[3] and b"echo" in recorded[3]
