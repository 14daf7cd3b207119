"""Recording through the proxy and replaying, with the real SDKs, and sharing with in-process."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import threading
import uuid

import anthropic
import openai
import pytest
from pyrula.proxy import ConfigError

from pyrula.cassette import Cassette
from pyrula.journal import Exchanges, Store
from tests.fakes.openai_api import chat_completion, chat_json
from tests.fakes.postgres import fresh_url
from tests.fakes.provider import ANTHROPIC_LIB, OPENAI_LIB, Upstream, journal_transport, json_reply
from tests.fakes.server import Script, Server
from tests.proxy.support import KEY, routes_to, running, shared, store_bytes

ASK = [{"role": "user", "content": "What is a pyrula?"}]


def openai_via(proxy, **kw):
    return openai.OpenAI(
        api_key=KEY,
        base_url=proxy.base_url("openai") + "/v1",
        max_retries=kw.pop("retries", 0),
        http_client=shared(OPENAI_LIB.Client),
        **kw,
    )


def anthropic_via(proxy, *, is_async=False):
    if is_async:
        return anthropic.AsyncAnthropic(
            api_key=KEY, base_url=proxy.base_url("anthropic"), max_retries=0
        )
    return anthropic.Anthropic(
        api_key=KEY,
        base_url=proxy.base_url("anthropic"),
        max_retries=0,
        http_client=shared(ANTHROPIC_LIB.Client),
    )


def records(store):
    with Store(store) as opened:
        exchanges = Exchanges(opened)
        return [(key, record) for key, record in exchanges.scan()]


def test_openai_chat_recorded_through_the_proxy_replays_offline_identically(store, standin):
    routes = routes_to(standin.url)
    with running(store, "record", routes=routes) as proxy:
        client = openai_via(proxy)
        live = client.chat.completions.create(model="gpt-test", messages=ASK)
        live_chunks = [
            c.model_dump()
            for c in client.chat.completions.create(model="gpt-test", messages=ASK, stream=True)
        ]
    served = standin.count()
    with running(store, "replay", routes=routes) as proxy:
        client = openai_via(proxy)
        replayed = client.chat.completions.create(model="gpt-test", messages=ASK)
        replayed_chunks = [
            c.model_dump()
            for c in client.chat.completions.create(model="gpt-test", messages=ASK, stream=True)
        ]
    assert standin.count() == served  # replay never reached the provider
    assert replayed.model_dump() == live.model_dump()
    assert replayed_chunks == live_chunks
    assert live.id.startswith("chatcmpl-standin")  # a recorded reply, not a fresh answer


def test_async_anthropic_plain_and_streamed_replay_offline(store, standin):
    routes = routes_to(standin.url)

    async def calls(proxy):
        async with anthropic_via(proxy, is_async=True) as client:
            message = await client.messages.create(model="claude-test", max_tokens=20, messages=ASK)
            events = [
                e.model_dump()
                async for e in await client.messages.create(
                    model="claude-test", max_tokens=20, messages=ASK, stream=True
                )
            ]
        return message.model_dump(), events

    with running(store, "record", routes=routes) as proxy:
        live = asyncio.run(calls(proxy))
    served = standin.count()
    with running(store, "replay", routes=routes) as proxy:
        replayed = asyncio.run(calls(proxy))
    assert standin.count() == served
    assert replayed == live
    assert live[1][-1]["type"] == "message_stop"


def test_an_exchange_recorded_in_process_replays_through_the_proxy(store):
    upstream = Upstream(OPENAI_LIB, lambda r: json_reply(chat_completion("from in-process")))
    inner = journal_transport(OPENAI_LIB, upstream.transport())
    in_process = openai.OpenAI(
        api_key=KEY,
        base_url="https://api.openai.com/v1",
        http_client=OPENAI_LIB.Client(transport=inner),
    )
    with in_process, Cassette("shared", store=store):
        live = in_process.chat.completions.create(model="gpt-test", messages=ASK)
    with running(store, "replay", cassette="shared") as proxy:
        replayed = openai_via(proxy).chat.completions.create(model="gpt-test", messages=ASK)
    assert len(upstream.calls) == 1
    assert replayed.model_dump() == live.model_dump()


def test_an_exchange_recorded_through_the_proxy_replays_in_process(store, standin):
    with running(store, "record", routes=routes_to(standin.url)) as proxy:
        live = openai_via(proxy).chat.completions.create(model="gpt-test", messages=ASK)
        live_chunks = [
            c.model_dump()
            for c in openai_via(proxy).chat.completions.create(
                model="gpt-test", messages=ASK, stream=True
            )
        ]

    def unreachable(request):
        raise AssertionError(f"replay went to the network: {request.url}")

    transport = journal_transport(OPENAI_LIB, OPENAI_LIB.MockTransport(unreachable))
    in_process = openai.OpenAI(
        api_key="sk-other",
        base_url="http://openai.test/v1",
        http_client=OPENAI_LIB.Client(transport=transport),
    )
    with Cassette("proxy", mode="none", store=store):
        replayed = in_process.chat.completions.create(model="gpt-test", messages=ASK)
        replayed_chunks = [
            c.model_dump()
            for c in in_process.chat.completions.create(model="gpt-test", messages=ASK, stream=True)
        ]
    assert replayed.model_dump() == live.model_dump()
    assert replayed_chunks == live_chunks


def test_a_replay_miss_is_a_readable_sdk_error_naming_nearest_and_differences(
    store, standin, caplog
):
    with running(store, "record", routes=routes_to(standin.url)) as proxy:
        recorded = openai_via(proxy).chat.completions.create(model="gpt-test", messages=ASK)
    changed = [{"role": "user", "content": "What is a murex?"}]
    caplog.set_level(logging.INFO, logger="pyrula.proxy")
    with (
        running(store, "replay", routes=routes_to(standin.url)) as proxy,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        openai_via(proxy, retries=3).chat.completions.create(model="gpt-test", messages=changed)
    error = caught.value
    assert error.status_code == 409
    message = str(error)
    assert "messages[0].content changed" in message
    assert "What is a pyrula?" in message and "What is a murex?" in message
    body = error.body
    assert isinstance(body, dict) and body["type"] == "pyrula_replay_miss"
    [(_, record)] = records(store)
    assert body["nearest"] == record.id
    assert any("messages[0].content" in d for d in body["differences"])
    assert recorded.id  # recorded once, and the SDK did not retry the miss:
    assert sum(r.getMessage().startswith("miss") for r in caplog.records) == 1


def test_anthropic_sdk_surfaces_a_miss_as_its_own_status_error(store, standin):
    with running(store, "record", routes=routes_to(standin.url)) as proxy:
        anthropic_via(proxy).messages.create(model="c", max_tokens=5, messages=ASK)
    with (
        running(store, "replay", routes=routes_to(standin.url)) as proxy,
        pytest.raises(anthropic.APIStatusError) as caught,
    ):
        anthropic_via(proxy).messages.create(
            model="c", max_tokens=5, messages=[{"role": "user", "content": "other"}]
        )
    assert caught.value.status_code == 409
    assert "pyrula_replay_miss" in str(caught.value)
    assert "messages[0].content" in str(caught.value)


def test_credentials_go_upstream_in_record_mode_and_never_reach_the_store(store):
    with (
        Server(lambda seen: Script(frames=[chat_json("ok")])) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
    ):
        openai_via(proxy).chat.completions.create(model="m", messages=ASK)
        anthropic_via(proxy).messages.create(model="c", max_tokens=5, messages=ASK)
    openai_seen, anthropic_seen = upstream.seen
    assert openai_seen.headers["authorization"] == f"Bearer {KEY}"
    # anthropic 2.x sends the key as a bearer token, 0.x as x-api-key
    assert KEY in anthropic_seen.headers.get(
        "x-api-key", anthropic_seen.headers.get("authorization", "")
    )
    assert len(records(store)) == 2
    assert KEY.encode() not in store_bytes(store)


def test_each_of_a_repeated_credential_header_is_masked_where_the_reply_echoes_it(store):
    first, second = "session=first-proxy-cookie-0123", "theme=second-proxy-cookie-4567"
    echo = {"choices": [], "seen": second}  # the reply echoes only the second cookie
    with (
        Server(lambda seen: Script(frames=[json.dumps(echo).encode()])) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
    ):
        reply = shared(OPENAI_LIB.Client).post(
            proxy.base_url("openai") + "/v1/chat/completions",
            headers=[("authorization", f"Bearer {KEY}"), ("cookie", first), ("cookie", second)],
            json={"model": "m", "messages": ASK},
        )
    assert reply.status_code == 200 and second in reply.text  # the caller's reply as it came
    assert len(records(store)) == 1
    for secret in (first, second, KEY):
        assert secret.encode() not in store_bytes(store), f"{secret!r} reached the store"


def test_the_cassette_header_selects_a_namespace(store, standin):
    with running(store, "record", routes=routes_to(standin.url)) as proxy:
        openai_via(proxy, default_headers={"x-pyrula-cassette": "suite-a"}).chat.completions.create(
            model="m", messages=ASK
        )
        openai_via(proxy).chat.completions.create(model="m", messages=ASK)
        with pytest.raises(openai.BadRequestError):
            openai_via(proxy, default_headers={"x-pyrula-cassette": "bad\tname"}).models.list()
    assert sorted(r.namespace for _, r in records(store)) == ["proxy", "suite-a"]


def test_repeated_requests_replay_in_order_and_reset_starts_over(store):
    answers = iter(["first", "second"])
    with (
        Server(lambda seen: Script(frames=[chat_json(next(answers))])) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
    ):
        client = openai_via(proxy)
        texts = [
            client.chat.completions.create(model="m", messages=ASK).choices[0].message.content
            for _ in range(2)
        ]
    assert texts == ["first", "second"]
    with running(store, "replay", routes=routes_to(upstream.url)) as proxy:
        client = openai_via(proxy)

        def ask():
            return (
                client.chat.completions.create(model="m", messages=ASK).choices[0].message.content
            )

        assert [ask(), ask()] == ["first", "second"]
        with pytest.raises(openai.ConflictError, match="recorded this"):
            ask()
        reset = shared(OPENAI_LIB.Client).post(proxy.url + "/_pyrula/reset")
        assert reset.json() == {"reset": ["proxy"]}
        assert ask() == "first"
    assert upstream.count() == 2


def test_auto_mode_replays_what_it_has_and_records_the_rest(store):
    with Server(
        lambda seen: Script(frames=[chat_json(seen.json()["messages"][0]["content"])])
    ) as upstream:
        with running(store, "record", routes=routes_to(upstream.url)) as proxy:
            openai_via(proxy).chat.completions.create(model="m", messages=ASK)
        with running(store, "auto", routes=routes_to(upstream.url)) as proxy:
            client = openai_via(proxy)
            again = client.chat.completions.create(model="m", messages=ASK)
            new = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "new"}]
            )
    assert again.choices[0].message.content == "What is a pyrula?"
    assert new.choices[0].message.content == "new"
    assert upstream.count() == 2
    assert len(records(store)) == 2


def test_record_mode_rerecords_and_never_deletes(store):
    with (
        Server(lambda seen: Script(frames=[chat_json("v")])) as upstream,
        running(store, "record", routes=routes_to(upstream.url)) as proxy,
    ):
        client = openai_via(proxy)
        client.chat.completions.create(model="m", messages=ASK)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
        first = {r.namespace + r.fingerprint: r.id for _, r in records(store)}
        with running(store, "record", routes=routes_to(upstream.url)) as proxy:
            openai_via(proxy).chat.completions.create(model="m", messages=ASK)
    second = {r.namespace + r.fingerprint: r.id for _, r in records(store)}
    assert first.keys() == second.keys()  # the untouched record is still there
    assert len(set(first.values()) & set(second.values())) == 1  # the touched one is new
    assert upstream.count() == 3


def test_passthrough_forwards_and_records_nothing(store):
    with (
        Server(lambda seen: Script(frames=[chat_json("live")])) as upstream,
        running(store, "passthrough", routes=routes_to(upstream.url)) as proxy,
    ):
        reply = openai_via(proxy).chat.completions.create(model="m", messages=ASK)
    assert reply.choices[0].message.content == "live"
    assert upstream.count() == 1
    assert not store.exists()


def test_replay_mode_never_opens_an_upstream_connection(store, standin):
    with running(store, "record", routes=routes_to(standin.url)) as proxy:
        openai_via(proxy).chat.completions.create(model="m", messages=ASK)
    accepted = []
    with socket.socket() as trap:
        trap.bind(("127.0.0.1", 0))
        trap.listen()
        trap.settimeout(0.2)
        trap_url = f"http://127.0.0.1:{trap.getsockname()[1]}"

        def count_connections():
            while True:
                try:
                    conn, _ = trap.accept()
                except OSError:
                    return
                accepted.append(conn)

        watcher = threading.Thread(target=count_connections, daemon=True)
        watcher.start()
        with running(store, "replay", routes=routes_to(trap_url)) as proxy:
            assert proxy.server.config.offline
            client = openai_via(proxy)
            client.chat.completions.create(model="m", messages=ASK)  # a hit
            with pytest.raises(openai.ConflictError):
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "?"}]
                )
            with pytest.raises(openai.ConflictError):
                client.models.list()  # a miss on a generic GET, too
        watcher.join(timeout=1)
    assert accepted == []


def test_replay_mode_refuses_to_start_without_a_store(tmp_path):
    with (
        pytest.raises(ConfigError, match="no store at"),
        running(tmp_path / "missing", "replay"),
    ):
        pass


def test_health_endpoint_reports_mode_and_routes(store, standin):
    with running(store, "auto", routes=routes_to(standin.url)) as proxy:
        health = shared(OPENAI_LIB.Client).get(proxy.url + "/_pyrula/health").json()
    assert health["mode"] == "auto" and health["cassette"] == "proxy"
    assert health["routes"]["/openai/"] == standin.url
    assert json.dumps(health)


def test_an_https_upstream_is_reached_through_the_real_tls_stack(store, tmp_path):
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(tls)
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    with Server(lambda seen: Script(frames=[chat_json("over tls")]), tls=tls) as upstream:
        assert upstream.url.startswith("https://")
        with running(store, "record", routes=routes_to(upstream.url), upstream_ca=ca_file) as proxy:
            live = openai_via(proxy).chat.completions.create(model="m", messages=ASK)
        with (
            running(store, "record", routes=routes_to(upstream.url)) as proxy,
            pytest.raises(openai.APIStatusError) as untrusted,
        ):  # no CA: the handshake fails
            openai_via(proxy).chat.completions.create(model="m", messages=ASK)
    assert live.choices[0].message.content == "over tls"
    assert untrusted.value.status_code == 502
    assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value) or "certificate" in str(
        untrusted.value
    )
    assert upstream.count() == 1


def test_a_gemini_stream_with_a_key_in_the_query_replays_and_the_key_is_kept_nowhere(store, caplog):
    caplog.set_level(logging.INFO, logger="pyrula.proxy")
    secret = "AIzaSyD-gemini-test-key-0123456789abcdefg"
    chunk = {
        "candidates": [{"content": {"parts": [{"text": "Hi"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1},
    }
    frames = [f"data: {json.dumps(chunk)}\r\n\r\n".encode()]
    path = f"/gemini/v1beta/models/gemini-test:streamGenerateContent?alt=sse&key={secret}"
    body = {"contents": [{"role": "user", "parts": [{"text": "Hello"}]}]}
    script = Script(headers={"content-type": "text/event-stream"}, frames=frames, chunked=True)
    with Server(lambda seen: script) as upstream:
        routes = routes_to(upstream.url, "gemini")
        with running(store, "record", routes=routes) as proxy:
            live = shared(OPENAI_LIB.Client).post(proxy.url + path, json=body)
        with running(store, "replay", routes=routes) as proxy:
            replayed = shared(OPENAI_LIB.Client).post(proxy.url + path, json=body)
    assert upstream.seen[0].path.endswith(f"key={secret}")  # forwarded as sent
    assert live.content == replayed.content == frames[0]
    [(_, record)] = records(store)
    assert record.surface.startswith("gemini.") and record.streamed
    assert secret.encode() not in store_bytes(store)
    assert secret not in caplog.text


def test_the_proxy_records_into_and_replays_from_a_postgresql_store(standin):
    url = fresh_url()
    routes = routes_to(standin.url)
    with running(url, "record", routes=routes) as proxy:
        live = openai_via(proxy).chat.completions.create(model="gpt-test", messages=ASK)
    served = standin.count()
    with running(url, "replay", routes=routes) as proxy:
        replayed = openai_via(proxy).chat.completions.create(model="gpt-test", messages=ASK)
    assert standin.count() == served
    assert replayed.model_dump() == live.model_dump()
    assert len(records(url)) == 1


def test_a_request_recorded_by_another_process_replays_through_the_proxy_uncanonicalised(store):
    """The proxy finds a request new to its process by its digest as sent, whatever key the
    client sends: the request is never canonicalised here."""
    from pyrula.fingerprints import Canonical, RequestParts, cached_or_sent

    from tests.fakes.elsewhere import record_elsewhere

    ask = [{"role": "user", "content": f"proxied {uuid.uuid4().hex}"}]
    body = json.dumps({"messages": ask, "model": "gpt-test"}).encode()
    headers = {"authorization": "Bearer sk-recorded-0123456789", "content-type": "application/json"}
    recorded = ("https://api.openai.com/v1/chat/completions", headers, body)
    record_elsewhere(str(store), [recorded], [chat_completion("from elsewhere")], cassette="shared")
    with running(store, "replay", cassette="shared") as proxy, OPENAI_LIB.Client() as client:
        reply = client.post(
            proxy.base_url("openai") + "/v1/chat/completions",
            content=body,
            headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
        )
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == "from elsewhere"
    parts = RequestParts("POST", recorded[0], recorded[1], body)
    assert not isinstance(cached_or_sent(parts), Canonical)
