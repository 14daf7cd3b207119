"""Real clients against the proxy in replay mode, offline: each gets the recorded bytes exactly.

One store is recorded through the proxy from the stand-in provider; a replay-mode proxy then
serves it to the openai and anthropic Python SDKs (whichever majors this environment has), curl,
and the official `openai` npm package run by Node. Between clients the proxy's occurrence count
is reset, so each client's first call is the recorded first call.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.fakes.provider import ANTHROPIC_LIB, OPENAI_LIB
from tests.proxy.support import KEY, routes_to, running

ASK = [{"role": "user", "content": "Name three sea snails."}]
CASES = {
    "openai": ("/openai/v1/chat/completions", {"model": "gpt-test", "messages": ASK}),
    "openai-stream": (
        "/openai/v1/chat/completions",
        {"model": "gpt-test", "messages": ASK, "stream": True},
    ),
    "anthropic": (
        "/anthropic/v1/messages",
        {"model": "claude-test", "max_tokens": 50, "messages": ASK},
    ),
    "anthropic-stream": (
        "/anthropic/v1/messages",
        {"model": "claude-test", "max_tokens": 50, "messages": ASK, "stream": True},
    ),
}
NODE_DIR = Path(__file__).parent / "node"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, standin):
    """The store, and the reply bytes the recording client received, per case."""
    store = tmp_path_factory.mktemp("clients") / "store"
    live: dict[str, bytes] = {}
    with running(store, "record", routes=routes_to(standin.url)) as proxy, httpx.Client() as http:
        for name, (path, body) in CASES.items():
            reply = http.post(proxy.url + path, json=body, headers={"x-api-key": KEY})
            assert reply.status_code == 200
            live[name] = reply.content
    return store, live


@pytest.fixture(scope="module")
def replay(recorded, standin):
    store, live = recorded
    served = standin.count()
    with running(store, "replay", routes=routes_to(standin.url)) as proxy:
        yield proxy, live
    assert standin.count() == served  # nothing reached the provider while replaying


def reset(proxy) -> None:
    httpx.post(proxy.url + "/_pyrula/reset").raise_for_status()


def test_openai_python_sdk_gets_identical_bytes_plain_and_streamed(replay):
    proxy, live = replay
    with openai.OpenAI(
        api_key=KEY,
        base_url=proxy.base_url("openai") + "/v1",
        http_client=OPENAI_LIB.Client(),
        max_retries=0,
    ) as client:
        reset(proxy)
        raw = client.chat.completions.with_raw_response.create(**CASES["openai"][1])
        assert raw.http_response.content == live["openai"]
        assert raw.parse().choices[0].message.content
        with client.chat.completions.with_streaming_response.create(
            **CASES["openai-stream"][1]
        ) as streamed:
            assert b"".join(streamed.iter_bytes()) == live["openai-stream"]
        reset(proxy)
        parsed = client.chat.completions.create(**CASES["openai"][1])
        recorded = json.loads(live["openai"])
        assert parsed.id == recorded["id"]
        assert parsed.choices[0].message.content == recorded["choices"][0]["message"]["content"]


def test_anthropic_python_sdk_gets_identical_bytes_plain_and_streamed(replay):
    proxy, live = replay
    with anthropic.Anthropic(
        api_key=KEY,
        base_url=proxy.base_url("anthropic"),
        http_client=ANTHROPIC_LIB.Client(),
        max_retries=0,
    ) as client:
        reset(proxy)
        raw = client.messages.with_raw_response.create(**CASES["anthropic"][1])
        assert raw.http_response.content == live["anthropic"]
        with client.messages.with_streaming_response.create(
            **CASES["anthropic-stream"][1]
        ) as streamed:
            assert b"".join(streamed.iter_bytes()) == live["anthropic-stream"]
        reset(proxy)
        events = [e.type for e in client.messages.create(**CASES["anthropic-stream"][1])]
        assert events[0] == "message_start" and events[-1] == "message_stop"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_gets_identical_bytes_plain_and_streamed(replay):
    proxy, live = replay
    reset(proxy)
    for name, (path, body) in CASES.items():
        result = subprocess.run(
            [
                "curl",
                "-sS",
                "--no-buffer",
                "--fail-with-body",
                "-H",
                "content-type: application/json",
                "--data-binary",
                json.dumps(body),
                proxy.url + path,
            ],
            capture_output=True,
            timeout=30,
            check=True,
        )
        assert result.stdout == live[name], name
    miss = subprocess.run(
        [
            "curl",
            "-sS",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "-H",
            "content-type: application/json",
            "--data-binary",
            json.dumps({"model": "m", "messages": [{"role": "user", "content": "?"}]}),
            proxy.url + "/openai/v1/chat/completions",
        ],
        capture_output=True,
        timeout=30,
    )
    body, _, status = miss.stdout.rpartition(b"\n")
    assert status == b"409"
    assert json.loads(body)["error"]["type"] == "pyrula_replay_miss"


def node_openai() -> Path:
    """A folder whose node_modules holds the `openai` npm package, installed on first use."""
    cache = Path(os.environ.get("PYRULA_NODE_CACHE") or Path.home() / ".cache" / "pyrula-tests")
    folder = cache / "node-openai"
    if not (folder / "node_modules" / "openai" / "package.json").exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--silent",
                "--prefix",
                str(folder),
                "openai",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return folder


@pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="node and npm are needed to run the official openai npm package",
)
def test_the_openai_npm_package_under_node_gets_identical_bytes(replay):
    proxy, live = replay
    modules = node_openai() / "node_modules"
    request = {
        "baseURL": proxy.base_url("openai") + "/v1",
        "resetURL": proxy.url + "/_pyrula/reset",
        "cases": [
            {"name": name, "body": body}
            for name, (path, body) in CASES.items()
            if name.startswith("openai")
        ],
        "miss": {"model": "gpt-test", "messages": [{"role": "user", "content": "Name four."}]},
    }
    result = subprocess.run(
        ["node", str(NODE_DIR / "client.cjs"), json.dumps(request)],
        capture_output=True,
        timeout=60,
        env={**os.environ, "NODE_PATH": str(modules)},
    )
    assert result.returncode == 0, result.stderr.decode()
    out = json.loads(result.stdout)
    for name in ("openai", "openai-stream"):
        assert base64.b64decode(out["cases"][name]["raw"]) == live[name], name
    assert out["cases"]["openai"]["parsed"] == json.loads(live["openai"])
    chunks = out["cases"]["openai-stream"]["parsed"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.startswith("openai stand-in")
    assert out["miss"]["status"] == 409
    assert "messages[0].content changed" in out["miss"]["message"]
