"""Each feature that needs an optional extra, run with the extra's package absent, raises
`MissingExtra`: an `ImportError` (and a `PyrulaError`) whose message names the exact pip command,
with the failed import kept as its cause. A module that imports its package once, at import
time, is tried in a fresh interpreter; one that imports it at the call, here. The package is
made absent by `tests.fakes.absent`, whose import fails as a missing package's does."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from pyrula.agents import tool
from pyrula.agents.llm.bedrock import BedrockLLM
from pyrula.agents.llm.messages import Message
from pyrula.agents.mcp import build_mcp_server
from pyrula.agents.native.mcp import MCPServerHTTP, MCPServerStdio
from pyrula.agents.native.schemas import OutputType
from pyrula.cli.app import app
from pyrula.errors import MissingExtra, PyrulaError
from pyrula.journal.vcr_import import convert
from tests.fakes.absent import blocked

ROOT = Path(__file__).resolve().parent.parent

# A fresh interpreter where `absent` cannot be imported; it runs `code` and prints what the
# ImportError it raised was.
_CHILD = """
import json
from tests.fakes.absent import refuse
refuse(*{absent!r})
from pyrula.errors import MissingExtra, PyrulaError
try:
{code}
except ImportError as exc:
    print(json.dumps({{
        "missing_extra": isinstance(exc, MissingExtra),
        "pyrula_error": isinstance(exc, PyrulaError),
        "message": str(exc),
        "name": exc.name,
        "cause": type(exc.__cause__).__name__,
    }}))
"""


def _in_a_fresh_interpreter(absent: list[str], code: str) -> dict[str, object]:
    indented = "\n".join(f"    {line}" for line in code.splitlines())
    script = _CHILD.format(absent=absent, code=indented)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout, f"no ImportError was raised\n{done.stderr}"
    outcome: dict[str, object] = json.loads(done.stdout)
    return outcome


@pytest.mark.parametrize(
    ("absent", "code", "message"),
    [
        pytest.param(
            ["psycopg", "psycopg_pool"],
            "from pyrula.journal.store import Store\nStore('postgresql://127.0.0.1:9/pyrula')",
            "a postgresql:// store needs psycopg 3 and its pool (psycopg is not installed): "
            "pip install 'pyrula[postgres]'",
            id="postgres-store",
        ),
        pytest.param(
            ["botocore"],
            "import pyrula.agents.compat.bedrock",
            "the Bedrock drop-in needs boto3 (botocore is not installed): "
            "pip install 'pyrula[agents,bedrock]'",
            id="bedrock-drop-in",
        ),
        pytest.param(
            ["botocore"],
            "from pyrula.agents.compat import bedrock",
            "the Bedrock drop-in needs boto3 (botocore is not installed): "
            "pip install 'pyrula[agents,bedrock]'",
            id="bedrock-drop-in-from-the-package",
        ),
        pytest.param(
            ["google.genai"],
            "from pyrula.agents.compat import genai",
            "pyrula.agents.compat.genai needs the agents,gemini extra (google.genai is not "
            "installed): pip install 'pyrula[agents,gemini]'",
            id="genai-drop-in",
        ),
        pytest.param(
            ["openai"],
            "from pyrula.agents.compat import AsyncOpenAI",
            "AsyncOpenAI needs the agents extra (openai is not installed): "
            "pip install 'pyrula[agents]'",
            id="openai-drop-in",
        ),
        pytest.param(
            ["langchain_core"],
            "from pyrula.agents.integrations import durable_chat_model",
            "durable_chat_model needs the agents,langchain extra (langchain_core is not "
            "installed): pip install 'pyrula[agents,langchain]'",
            id="langchain-integration",
        ),
    ],
)
def test_a_module_whose_package_is_absent_raises_missing_extra(absent, code, message):
    outcome = _in_a_fresh_interpreter(absent, code)
    assert outcome["message"] == message
    assert outcome["missing_extra"] and outcome["pyrula_error"]
    assert outcome["name"] == absent[0]
    assert outcome["cause"] == "ModuleNotFoundError"


def test_pyrula_demo_without_the_sdks_prints_the_pip_command(tmp_path):
    script = (
        "from tests.fakes.absent import refuse\n"
        "refuse('anthropic')\n"
        "from pyrula.cli.app import app\n"
        f"app(['demo', '--store', {str(tmp_path / 'store')!r}])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == (
        "pyrula demo needs the openai and anthropic SDKs (anthropic is not installed): "
        "pip install 'pyrula[agents]'"
    )
    assert not (tmp_path / "store").exists()


@pytest.fixture
def absent(monkeypatch):
    """`absent("mcp")`: importing mcp (or any module of it) fails for the rest of the test."""
    return lambda *names: blocked(monkeypatch, *names)


def _raised(call) -> MissingExtra:
    with pytest.raises(ImportError) as caught:  # still catchable as the ImportError it was
        call()
    error = caught.value
    assert isinstance(error, MissingExtra) and isinstance(error, PyrulaError)
    assert isinstance(error.__cause__, ImportError)
    return error


def test_reading_vcr_cassettes_without_pyyaml(absent, tmp_path):
    cassette = tmp_path / "chat.yaml"
    cassette.write_text("interactions: []\n")
    absent("yaml")
    error = _raised(lambda: convert([cassette]))
    assert str(error) == (
        "reading vcrpy cassettes needs PyYAML (yaml is not installed): pip install 'pyrula[vcr]'"
    )


def test_pyrula_import_vcr_without_pyyaml(absent, tmp_path):
    cassette = tmp_path / "chat.yaml"
    cassette.write_text("interactions: []\n")
    absent("yaml")
    result = CliRunner().invoke(app, ["import-vcr", str(cassette)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: reading vcrpy cassettes needs PyYAML (yaml is not installed): "
        "pip install 'pyrula[vcr]'"
    )


def test_bedrock_llm_signing_without_botocore(absent, monkeypatch):
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)

    def never(request: httpx2.Request) -> httpx2.Response:
        raise AssertionError("nothing is sent unsigned")

    llm = BedrockLLM("us.anthropic.claude-haiku-4-5", transport=httpx2.MockTransport(never))
    absent("botocore")
    error = _raised(lambda: asyncio.run(llm.complete([Message.user("hi")])))
    assert str(error) == (
        "BedrockLLM's SigV4 signing needs botocore (botocore is not installed): "
        "pip install 'pyrula[bedrock]'; or pass api_key= a Bedrock API key"
    )
    assert error.pip_command == "pip install 'pyrula[bedrock]'"


@pytest.mark.parametrize(
    "server",
    [MCPServerStdio("true"), MCPServerHTTP("http://127.0.0.1:9/mcp")],
    ids=["stdio", "http"],
)
def test_an_agents_mcp_server_without_the_mcp_sdk(absent, server):
    absent("mcp")

    async def open_session() -> None:
        async with server.session():
            raise AssertionError("no session opens without the SDK")

    error = _raised(lambda: asyncio.run(open_session()))
    assert str(error) == (
        "mcp_servers= needs the MCP SDK (mcp is not installed): pip install 'pyrula[mcp]'"
    )


def test_structured_output_without_pydantic(absent):
    absent("pydantic")
    error = _raised(lambda: OutputType(dict[str, int]))  # as an agent's output_type= builds it
    assert str(error) == (
        "structured output (or a tool parameter that is not a plain "
        "str/int/float/bool/list/dict) needs pydantic (pydantic is not installed): "
        "pip install 'pyrula[native]'"
    )


def test_serving_tools_over_mcp_without_the_mcp_sdk(absent, tmp_path):
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    server = build_mcp_server([add], store=tmp_path / "store")
    absent("mcp")
    error = _raised(server.sdk_server)
    assert str(error) == (
        "build_mcp_server needs the mcp SDK (mcp is not installed): "
        "pip install 'pyrula[agents]'; or pip install 'mcp>=1.24,<3'"
    )


def test_pyrula_ui_without_the_ui_extra(monkeypatch, tmp_path: Path):
    # `pyrula ui` looks for its packages without importing them: a None in sys.modules is what
    # importlib.util.find_spec answers None for, as for a package not installed.
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    monkeypatch.setitem(sys.modules, "jinja2", None)
    result = CliRunner().invoke(app, ["ui", "--store", str(tmp_path / "store")])
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: pyrula ui needs the ui extra (uvicorn, jinja2 are not installed): "
        "pip install 'pyrula[ui]'"
    )
