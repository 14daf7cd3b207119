"""`pyrula demo` and its stand-in provider, driven with the real SDKs (only 127.0.0.1 is used)."""

from __future__ import annotations

import asyncio
import io
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from rich.console import Console  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import pyrula  # noqa: E402
from pyrula.cli import demo as demo_command  # noqa: E402
from pyrula.cli.app import app  # noqa: E402
from pyrula.demo import durable, run  # noqa: E402
from pyrula.demo.standin import (  # noqa: E402
    ANTHROPIC_MESSAGES_PATH,
    OPENAI_CHAT_PATH,
    Received,
    Served,
    StandIn,
    reply_text,
)
from pyrula.journal import Exchanges, open_store  # noqa: E402
from pyrula.journal.keys import namespace_prefix  # noqa: E402
from pyrula.runtime import RunStore  # noqa: E402

ALL_FOUR = {
    Served(OPENAI_CHAT_PATH, False),
    Served(OPENAI_CHAT_PATH, True),
    Served(ANTHROPIC_MESSAGES_PATH, False),
    Served(ANTHROPIC_MESSAGES_PATH, True),
}


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn() as running:
        yield running


def _capture_results(monkeypatch: pytest.MonkeyPatch) -> list[run.DemoResult]:
    results: list[run.DemoResult] = []
    real = run.run_demo

    def capturing(store_path: Any) -> run.DemoResult:
        result = real(store_path)
        results.append(result)
        return result

    monkeypatch.setattr(run, "run_demo", capturing)
    return results


def _capture_durable(monkeypatch: pytest.MonkeyPatch) -> list[durable.DurableResult]:
    results: list[durable.DurableResult] = []
    real = durable.run_durable

    def capturing(store_path: Any, say: Any = None) -> durable.DurableResult:
        result = real(store_path, say)
        results.append(result)
        return result

    monkeypatch.setattr(durable, "run_durable", capturing)
    return results


def _canned_durable(store_path: Path, *, seen: tuple[int, ...] = (1, 1, 1, 1, 1)) -> Any:
    """A stand-in for `durable.run_durable` (no processes): each request seen `seen[i]` times."""

    def fake(store: Any, say: Any = None) -> durable.DurableResult:
        received = [
            Received(OPENAI_CHAT_PATH, False, f"digest{i}", f"question {i}", 0.0)
            for i, times in enumerate(seen)
            for _ in range(times)
        ]
        return durable.DurableResult(
            store=store_path,
            url="http://127.0.0.1:1",
            run_id="run_canned",
            status="completed",
            attempt=2,
            result={"plan": "canned"},
            error=None,
            received=received,
            received_at_kill=3,
            journaled_at_kill=3,
            workers=[durable.WorkerProcess(1, 1, -signal.SIGKILL), durable.WorkerProcess(2, 2, 0)],
            notes_path=store_path / durable.NOTES_FILE,
            notes=["run_canned:main/tool0\tnote"],
        )

    return fake


# -- the command -----------------------------------------------------------------------------------


def test_demo_command_records_live_and_replays_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = _capture_results(monkeypatch)
    monkeypatch.setattr(durable, "run_durable", _canned_durable(tmp_path / "store"))
    store = tmp_path / "store"

    outcome = CliRunner().invoke(app, ["demo", "--store", str(store)])

    assert outcome.exit_code == 0, outcome.output
    assert "provider calls: 4 live while recording, 0 during replay" in outcome.output
    # The journal listing follows the table: it names the recorded surfaces.
    listing = outcome.output.split("$ pyrula journal ls", 1)[1].split("durable run", 1)[0]
    assert "openai.chat" in listing and "anthropic.messages" in listing
    (result,) = results
    assert result.ok
    # The counts come from the stand-in's own log, read after the replay.
    assert result.live_calls == 4
    assert result.replay_calls == 0
    assert len(result.log) == 4
    assert set(result.log) == ALL_FOUR
    assert (result.recorded, result.replayed) == (4, 4)
    for call, spec in zip(result.calls, run.CALLS, strict=True):
        assert call.replayed is not None
        assert call.replayed.text == call.recorded.text == reply_text(spec.provider, spec.prompt)
        assert call.replayed.id == call.recorded.id
    # Every live answer got a fresh id: identical ids mean the replay came from the journal.
    assert len({call.recorded.id for call in result.calls}) == 4

    records = [r for _, r in Exchanges(open_store(store)).scan(namespace_prefix("pyrula-demo"))]
    assert sorted((r.surface, r.streamed) for r in records) == [
        ("anthropic.messages", False),
        ("anthropic.messages", True),
        ("openai.chat", False),
        ("openai.chat", True),
    ]


def test_demo_default_store_is_pyrula_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = _capture_results(monkeypatch)
    monkeypatch.setattr(durable, "run_durable", _canned_durable(tmp_path / "from-env"))
    monkeypatch.setenv("PYRULA_STORE", str(tmp_path / "from-env"))

    outcome = CliRunner().invoke(app, ["demo"])

    assert outcome.exit_code == 0, outcome.output
    assert results[0].store == tmp_path / "from-env"
    assert (tmp_path / "from-env" / "data.mdb").exists()


def test_demo_runs_again_into_the_same_store(tmp_path: Path) -> None:
    first = run.run_demo(tmp_path / "store")
    second = run.run_demo(tmp_path / "store")

    assert first.ok and second.ok
    assert [c.recorded.text for c in first.calls] == [c.recorded.text for c in second.calls]
    # mode="all" re-recorded the cassette: still four exchanges, the new ones.
    records = list(Exchanges(open_store(tmp_path / "store")).scan(namespace_prefix("pyrula-demo")))
    assert len(records) == 4


def test_the_demo_run_twice_lists_each_exchange_once(tmp_path: Path) -> None:
    store = tmp_path / ".pyrula"
    runner = CliRunner()
    for _ in range(2):
        outcome = runner.invoke(app, ["demo", "--store", str(store)])
        assert outcome.exit_code == 0, outcome.output

    def journal(*args: str) -> Any:
        listed = runner.invoke(app, ["journal", *args, "--store", str(store), "--json"])
        assert listed.exit_code == 0, listed.output
        return json.loads(listed.output)

    ids = [row["id"] for row in journal("ls")]
    # Per run: 4 cassette calls (re-recorded the second time), 5 durable, 2 native live.
    assert len(ids) == len(set(ids)) == 4 + 2 * (5 + 2)
    for record_id in ids:  # and each id names one exchange
        assert journal("show", record_id[:12])["id"] == record_id
    # The native agent's replay is a fork: it answers its two calls from the exchanges its
    # source recorded, and lists them as its own model calls.
    forks = [r for r in RunStore(open_store(store)).runs() if r.forked_from]
    assert len(forks) == 2
    for forked in forks:
        source = forked.forked_from["run"] if forked.forked_from else ""
        mine = [row["id"] for row in journal("ls", "--run", forked.id)]
        assert len(mine) == 2 and mine == [row["id"] for row in journal("ls", "--run", source)]


def test_journal_listing_falls_back_to_its_own_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run.run_demo(tmp_path / "store").ok
    monkeypatch.setattr(demo_command, "journal_ls_command", lambda: None)
    out = io.StringIO()

    demo_command.show_journal(tmp_path / "store", Console(file=out, width=200))

    text = out.getvalue()
    assert f"$ pyrula journal ls pyrula-demo --store {tmp_path / 'store'}" in text
    assert text.count("openai.chat") == 2 and text.count("anthropic.messages") == 2
    assert "POST /v1/chat/completions" in text and "POST /v1/messages" in text


def test_demo_exits_non_zero_when_the_replay_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that asks something else on replay misses the journal: reported, exit 1."""
    prompts = iter(["first question", "a different question"])

    def drifting(standin: StandIn, prompt: str) -> run.Reply:
        return run.openai_plain(standin, next(prompts))

    call = run.DemoCall("openai", "chat.completions", False, "sync", "unused", drifting)
    monkeypatch.setattr(run, "CALLS", (call,))
    monkeypatch.setattr(durable, "run_durable", _canned_durable(tmp_path / "store"))
    results = _capture_results(monkeypatch)

    outcome = CliRunner().invoke(app, ["demo", "--store", str(tmp_path / "store")])

    assert outcome.exit_code == 1, outcome.output
    (result,) = results
    assert not result.ok
    assert result.replay_error is not None and "ReplayMiss" in result.replay_error
    assert (result.live_calls, result.replay_calls) == (1, 0)
    assert "replay failed" in outcome.output


def test_demo_refuses_a_folder_that_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")

    outcome = CliRunner().invoke(app, ["demo", "--store", str(tmp_path)])

    assert outcome.exit_code == 1
    assert "pyrula demo failed" in outcome.output


# -- the durable run -------------------------------------------------------------------------------


def _skip_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave the record/replay section out (a passing canned result), to test the durable one."""

    def recorded(store: Any) -> run.DemoResult:
        reply = run.Reply("id", "text")
        return run.DemoResult(
            store=Path(store),
            url="http://127.0.0.1:1",
            stacks={},
            calls=[
                run.CallResult(c.provider, c.call, c.streamed, c.style, reply, reply)
                for c in run.CALLS
            ],
            live_calls=len(run.CALLS),
            replay_calls=0,
            log=[],
            recorded=len(run.CALLS),
            replayed=len(run.CALLS),
        )

    monkeypatch.setattr(run, "run_demo", recorded)
    monkeypatch.setattr(demo_command, "show_journal", lambda store, console: None)


def test_demo_durable_run_survives_sigkill_without_repeating_a_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real thing: two worker processes, the first SIGKILLed after three model calls."""
    _skip_recording(monkeypatch)
    results = _capture_durable(monkeypatch)
    store = tmp_path / "store"

    outcome = CliRunner().invoke(app, ["demo", "--store", str(store)])

    assert outcome.exit_code == 0, outcome.output
    (result,) = results
    assert result.ok, result.failures()
    # Counted from the stand-in's own log: five distinct requests, none received twice.
    assert (result.live_calls, result.repeated_calls, len(result.received)) == (5, 0, 5)
    assert "provider calls: 5 live, 0 repeated after the crash" in outcome.output
    assert [r.prompt.split(" (")[0] for r in result.received] == list(durable.QUESTIONS)
    assert [r.streamed for r in result.received] == [False, True, False, False, False]
    # The kill landed after the third call and before the fourth, in a real worker process.
    assert (result.journaled_at_kill, result.received_at_kill) == (3, 3)
    assert [w.returncode for w in result.workers] == [-signal.SIGKILL, 0]
    assert f"SIGKILL sent to worker 1 (pid {result.workers[0].pid})" in outcome.output
    # Completed by the second worker, in the second attempt.
    assert (result.status, result.attempt) == ("completed", 2)
    replies = result.result["replies"]
    assert len(set(replies)) == 5 and all(r.startswith("chatcmpl-standin") for r in replies)
    # The tool's side effect happened once, under its idempotency key.
    key = f"{result.run_id}:main/tool0"
    assert result.notes == [line for line in result.notes if line.startswith(key + "\t")]
    assert len(result.notes) == 1
    assert result.result["note"] == {"saved": key}
    # The run's journal: printed by `pyrula runs show`, and what it says.
    assert f"$ pyrula runs show {result.run_id} --store {store}\n" in outcome.output
    shown = outcome.output.split(f"$ pyrula runs show {result.run_id}", 1)[1]
    assert "completed (attempt 2)" in shown and "tool:done" in shown
    events = RunStore(open_store(store)).events(result.run_id)
    kinds = [e.type for e in events]
    assert kinds.count("llm:done") == 5 and kinds.count("tool:done") == 1
    assert kinds.count("run:attempt") == 2 and kinds[-1] == "run:done"
    # Calls 1-3 were journaled by the first attempt, 4-5 by the second; none twice.
    second = kinds.index("run:attempt", kinds.index("run:attempt") + 1)
    assert kinds[:second].count("llm:done") == 3 and kinds[second:].count("llm:done") == 2


def test_demo_exits_non_zero_when_the_provider_saw_a_request_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _skip_recording(monkeypatch)
    monkeypatch.setattr(durable, "run_durable", _canned_durable(tmp_path, seen=(1, 1, 2, 1, 1)))

    outcome = CliRunner().invoke(app, ["demo", "--store", str(tmp_path / "store")])

    assert outcome.exit_code == 1, outcome.output
    assert "provider calls: 5 live, 1 repeated after the crash" in outcome.output
    assert "1 request(s) reached the provider more than once" in outcome.output


def test_each_sdk_gets_the_transport_of_its_own_http_stack() -> None:
    import httpx2

    for sdk in (openai, anthropic):
        base = __import__(f"{sdk.__name__}._base_client", fromlist=["_"])
        on_httpx2 = hasattr(base, "httpx2")
        assert run.uses_httpx2(sdk) is on_httpx2
        client = run.http_client(sdk, sync=True)
        expected = pyrula.Httpx2Transport if on_httpx2 else pyrula.HttpxTransport
        assert isinstance(client, httpx2.Client if on_httpx2 else httpx.Client)
        assert isinstance(client._transport, expected)
        client.close()


# -- the stand-in, read by the real SDKs -----------------------------------------------------------


def test_openai_sdk_parses_the_standin_plain_and_streamed(standin: StandIn) -> None:
    client = openai.OpenAI(api_key="any", base_url=standin.openai_base_url, max_retries=0)
    messages = [{"role": "user", "content": "Say something nice"}]
    expected = reply_text("openai", "Say something nice")

    plain = client.chat.completions.create(model="m", messages=messages)
    assert plain.choices[0].message.content == expected
    assert plain.choices[0].finish_reason == "stop"

    chunks = list(
        client.chat.completions.create(
            model="m", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert len({c.id for c in chunks}) == 1 and chunks[0].id != plain.id

    bare = list(client.chat.completions.create(model="m", messages=messages, stream=True))
    assert all(c.usage is None for c in bare)
    assert bare[-1].choices[0].finish_reason == "stop"

    async def streamed_async() -> str:
        async with openai.AsyncOpenAI(
            api_key="any", base_url=standin.openai_base_url, max_retries=0
        ) as aclient:
            stream = await aclient.chat.completions.create(
                model="m", messages=messages, stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(streamed_async()) == expected
    assert standin.log == [
        Served(OPENAI_CHAT_PATH, False),
        Served(OPENAI_CHAT_PATH, True),
        Served(OPENAI_CHAT_PATH, True),
        Served(OPENAI_CHAT_PATH, True),
    ]


def test_anthropic_sdk_parses_the_standin_plain_and_streamed(standin: StandIn) -> None:
    client = anthropic.Anthropic(api_key="any", base_url=standin.anthropic_base_url, max_retries=0)
    content = [{"type": "text", "text": "Tell me a story"}]  # content blocks, not a string
    messages = [{"role": "user", "content": content}]
    expected = reply_text("anthropic", "Tell me a story")

    plain = client.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=messages)
    assert plain.content[0].text == expected
    assert plain.stop_reason == "end_turn"

    with client.messages.stream(
        model="claude-haiku-4-5", max_tokens=64, messages=messages
    ) as stream:
        assert "".join(stream.text_stream) == expected
        final = stream.get_final_message()
    assert final.content[0].text == expected
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 1

    events = [
        e.type
        for e in client.messages.create(
            model="claude-haiku-4-5", max_tokens=64, messages=messages, stream=True
        )
    ]
    assert events[:2] == ["message_start", "content_block_start"]
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(events[2:-3]) == {"content_block_delta"}  # the SDK drops `ping`
    assert standin.log == [
        Served(ANTHROPIC_MESSAGES_PATH, False),
        Served(ANTHROPIC_MESSAGES_PATH, True),
        Served(ANTHROPIC_MESSAGES_PATH, True),
    ]


def test_standin_flushes_each_event_as_its_own_chunk(standin: StandIn) -> None:
    body = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "one two three"}],
    }
    with (
        httpx.Client() as client,
        client.stream("POST", standin.openai_base_url + "/chat/completions", json=body) as reply,
    ):
        assert reply.headers["content-type"].startswith("text/event-stream")
        pieces = list(reply.iter_raw())
    assert all(p.startswith(b"data: ") and p.endswith(b"\n\n") for p in pieces)
    assert pieces[-1] == b"data: [DONE]\n\n"
    usage = json.loads(pieces[-2][len(b"data: ") :])
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0

    body = {"model": "m", "max_tokens": 9, "stream": True, "messages": body["messages"]}
    with (
        httpx.Client() as client,
        client.stream("POST", standin.anthropic_base_url + "/v1/messages", json=body) as reply,
    ):
        pieces = list(reply.iter_raw())
    assert pieces[0].startswith(b"event: message_start\ndata: ")
    assert pieces[-1] == b'event: message_stop\ndata: {"type": "message_stop"}\n\n'


def test_standin_answers_unknown_routes_and_bad_bodies_with_errors(standin: StandIn) -> None:
    with httpx.Client(base_url=standin.url) as client:
        assert client.post("/v1/embeddings", json={}).status_code == 404
        assert client.post("/v1/messages", content=b"{not json").status_code == 400
    assert standin.log == [
        Served("/v1/embeddings", False),
        Served(ANTHROPIC_MESSAGES_PATH, False),
    ]


def test_stopped_standin_cuts_kept_alive_connections_and_refuses_new_ones() -> None:
    standin = StandIn().start()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=standin.url) as client:
        assert client.post("/v1/chat/completions", json=body).status_code == 200
        standin.stop()
        # The pooled keep-alive connection was cut and the port no longer listens.
        with pytest.raises(httpx.TransportError):
            client.post("/v1/chat/completions", json=body)
    assert standin.count() == 1
    assert not standin.running


def test_standin_log_tells_a_repeated_request_from_a_new_one(standin: StandIn) -> None:
    """What `provider calls: N live, M repeated` counts: the same request received twice."""
    first = {"model": "m", "messages": [{"role": "user", "content": "one"}]}
    reordered = {"messages": [{"content": "one", "role": "user"}], "model": "m"}
    other = {"model": "m", "messages": [{"role": "user", "content": "two"}]}
    with httpx.Client(base_url=standin.url) as client:
        for body in (first, reordered, other):
            assert client.post("/v1/chat/completions", json=body).status_code == 200
    received = standin.received
    assert [r.prompt for r in received] == ["one", "one", "two"]
    assert received[0].digest == received[1].digest != received[2].digest
    assert [r.served for r in received] == standin.log


def test_durable_worker_entry_point_wants_a_store() -> None:
    assert durable.main([]) == 2
