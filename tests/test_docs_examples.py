"""Every ```python block of README.md and docs/*.md runs (issue 40).

The convention, for whoever writes a page:

- Each ```python block is one example, run as a script in a process of its own (forked from
  a host that imported pyrula and the SDKs once), with its own namespace and environment, in
  an empty temporary folder (so `.pyrula` and any file it writes land there; `PYRULA_STORE`
  points there too). The stand-in providers of `tests/fakes/any_provider.py`
  serve on 127.0.0.1, and the SDKs find them through their usual environment:
  `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`,
  `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, and fake keys (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
  `GEMINI_API_KEY`, `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, region us-east-1). A connection
  to anywhere but loopback raises. So write real, short values (`messages=[{"role": "user",
  "content": "Hi"}]`), never `...` or `[...]`, and build clients without keys or URLs.
- Top-level `await` is allowed, as in `python -m asyncio` or a notebook: a block that uses it
  runs as one coroutine under `asyncio.run`.
- An HTML comment `<!-- example: ... -->` on the lines just before the fence (blank lines may
  come between; several may stack) changes how it runs:
  - `<!-- example: continues -->`: the block continues the page's previous block: both run in
    one process, the earlier one first (a chain of them runs whole).
  - `<!-- example: pytest -->`: the block is a test module. It is written to `test_example.py`
    and run by `pytest --pyrula-record-mode=once` (the plugin records on the stand-in); the run
    must pass and run at least one test. A block that defines a top-level `test_*` function is
    run so without the marker.
  - `<!-- example: replies: [...] -->`: the stand-in model answers the model calls (chat
    completions, messages, generateContent, converse) from this JSON script, the turn chosen by
    how many assistant turns the request already holds: a string is a final answer (JSON text
    for a structured output), `{"call": "name", "args": {...}}` asks for a tool, a list of those
    asks for several at once. Without it each provider gives its stand-in's default reply.
  - `<!-- example: not run: REASON -->`: not run; REASON must name the test that covers the
    block (`tests/path.py::test_name`), and that test must exist. Keep these few.
- A block that imports a package of a dedicated nox leg (`OPTIONAL` below: LangChain,
  LangGraph, Pydantic AI, the OpenAI Agents SDK) is skipped where the package is missing and
  runs on that leg, which names itself by its `PYRULA_REQUIRE_*` variable (`LEGS` below; or
  `PYRULA_DOCS_LEG=<leg>`): there only that leg's blocks are collected, and a missing package
  fails. Everything else runs on the `tests(stack='httpx2')` leg (the examples are written
  for the newest SDKs).
- Test ids are `page:line` of the fence, e.g. `test_example[docs/agents.md:10]`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import agent_api, any_provider
from tests.fakes.server import Server
from tests.support import ROOT, known_test, pages

# A top-level module a block may import that only a dedicated nox leg installs -> that leg.
OPTIONAL = {
    "langchain_core": "langchain",
    "langchain_openai": "langchain",
    "langchain_anthropic": "langchain",
    "langgraph": "langchain",
    "pydantic_ai": "pydantic_ai",
    "agents": "openai_agents",
}
# The variable each dedicated leg sets (noxfile.py) -> the leg.
LEGS = {
    "PYRULA_REQUIRE_LANGCHAIN": "langchain",
    "PYRULA_REQUIRE_PYDANTIC_AI": "pydantic_ai",
    "PYRULA_REQUIRE_OPENAI_AGENTS": "openai_agents",
}
LEG = os.environ.get("PYRULA_DOCS_LEG") or next(
    (leg for variable, leg in LEGS.items() if os.environ.get(variable)), ""
)
TIMEOUT_S = 60
_MARKER = re.compile(r"<!--\s*example:\s*(.*?)\s*-->", re.S)
_TEST_ID = re.compile(r"tests/[\w/]+\.py::[\w:\[\]-]+")


@dataclass
class Example:
    page: str
    line: int
    code: str
    directives: list[str] = field(default_factory=list)
    before: list[Example] = field(default_factory=list)  # the blocks it continues

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def directive(self, name: str) -> str | None:
        for found in self.directives:
            head, _, rest = found.partition(":")
            if head.strip() == name:
                return rest.strip()
        return None

    @property
    def source(self) -> str:
        return "\n\n".join(e.code for e in [*self.before, self])

    @property
    def is_test_module(self) -> bool:
        tests = [
            node
            for node in ast.parse(self.source).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test")
        ]
        return self.directive("pytest") is not None or bool(tests)

    def legs(self) -> set[str]:
        tree = ast.parse(self.source)
        modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        return {OPTIONAL[m.split(".")[0]] for m in modules if m.split(".")[0] in OPTIONAL}


def _markers_before(lines: list[str], fence: int) -> list[str]:
    """The `<!-- example: ... -->` comments just above line index `fence`, top one first."""
    above = "\n".join(lines[:fence]).rstrip()
    found: list[str] = []
    while above.endswith("-->"):
        start = above.rfind("<!--")
        match = _MARKER.fullmatch(above[start:])
        if start < 0 or match is None:
            break
        found.insert(0, match.group(1))
        above = above[:start].rstrip()
    return found


def examples() -> list[Example]:
    found: list[Example] = []
    for path in pages():
        lines = path.read_text().splitlines()
        page = str(path.relative_to(ROOT))
        previous: Example | None = None
        index = 0
        while index < len(lines):
            if lines[index].strip() == "```python":
                end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
                example = Example(page, index + 1, "\n".join(lines[index + 1 : end]))
                example.directives = _markers_before(lines, index)
                if example.directive("continues") is not None:
                    assert previous is not None, f"{example.id} continues no block"
                    example.before = [*previous.before, previous]
                found.append(example)
                previous, index = example, end
            index += 1
    return found


ALL = examples()
COLLECTED = [e for e in ALL if LEG in e.legs()] if LEG else ALL


def _turns(script: str) -> list[agent_api.Turn]:
    def turn(item: Any) -> agent_api.Turn:
        if isinstance(item, str):
            return agent_api.text(item)
        asked = item if isinstance(item, list) else [item]
        return agent_api.calls(*((call["call"], call.get("args", {})) for call in asked))

    return [turn(item) for item in json.loads(script)]


# The examples' host: a Python process that imports the heavy modules once (`PRELOAD`), then
# forks a child per example (a fresh namespace, working directory and environment; loopback
# only; top-level await allowed; `pytest` mode runs a test module). Its protocol: one JSON job a
# line on stdin, one JSON exit status a line on stdout; the child's output goes to files.
PRELOAD = [
    "pyrula", "pyrula.agents", "pyrula.agents.compat", "pyrula.agents.testing", "pyrula.runtime",
    "pyrula.journal", "pyrula.proxy", "openai", "anthropic", "httpx", "httpx2", "boto3",
    "pydantic", "pytest",
]  # fmt: skip
_HOST = r"""
import ast, asyncio, importlib, inspect, json, os, signal, socket, sys, threading, traceback

LOCAL = {"127.0.0.1", "::1", "localhost", "", "0.0.0.0", "::"}  # the last three: to listen
_connect, _getaddrinfo = socket.socket.connect, socket.getaddrinfo

def _local(host):
    return host is None or (host.decode() if isinstance(host, bytes) else host) in LOCAL

def _refuse(where):
    raise OSError(f"a docs example tried to reach {where!r}: examples talk to 127.0.0.1 only")

def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
        _refuse(address)
    return _connect(self, address)

def getaddrinfo(host, *args, **kwargs):
    if not _local(host):
        _refuse(host)
    return _getaddrinfo(host, *args, **kwargs)

def run(mode, path):
    if mode == "pytest":
        import pytest
        return pytest.main(["-q", "-p", "no:cacheprovider", "--pyrula-record-mode=once", path])
    source = open(path).read()
    code = compile(source, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"__name__": "__main__", "__file__": path}
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))
    else:
        exec(code, namespace)
    return 0

def child(job):
    signal.alarm(job["timeout"])  # a hung example dies of SIGALRM
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    for fd, name, flags in ((0, os.devnull, os.O_RDONLY), (1, job["out"], os.O_WRONLY | os.O_CREAT),
                            (2, job["err"], os.O_WRONLY | os.O_CREAT)):
        os.dup2(os.open(name, flags), fd)
    sys.path[0], sys.argv = job["cwd"], [job["script"]]
    try:
        status = run(job["mode"], job["script"])
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(status or 0))

socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
for line in sys.stdin:
    job = json.loads(line)
    if threading.active_count() > 1:  # a fork would copy a thread's locks, not the thread
        print(json.dumps({"status": None, "threads": threading.active_count()}), flush=True)
        continue
    pid = os.fork()
    if pid == 0:
        child(job)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)
"""


@dataclass
class Done:
    status: int
    stdout: str
    stderr: str


class Host:
    """One examples' host per test process (per xdist worker)."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYRULA_", "PYTEST_"))}
        env.pop("PYTHONPATH", None)  # the installed pyrula, as a user has it
        self.process = subprocess.Popen(
            [sys.executable, "-c", _HOST, *PRELOAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=tempfile.gettempdir(),
            text=True,
        )

    def run(self, mode: str, script: Path, env: dict[str, str]) -> Done:
        out, err = script.with_suffix(".out"), script.with_suffix(".err")
        job = {"mode": mode, "script": str(script), "cwd": str(script.parent), "env": env}
        job |= {"out": str(out), "err": str(err), "timeout": TIMEOUT_S}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        assert answer["status"] is not None, f"the host had {answer['threads']} threads"
        return Done(answer["status"], out.read_text(), err.read_text())

    def close(self) -> None:
        with self.process:  # closes its pipes (stdin first: the host ends), then waits
            pass


@pytest.fixture(scope="module")
def host() -> Iterator[Host]:
    started = Host()
    yield started
    started.close()


def _environment(url: str, tmp_path: Path, *, pytest_mode: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYRULA_", "PYTEST_"))}
    env.update(any_provider.environment(url))
    env.pop("PYTHONPATH", None)  # the installed pyrula, as a user has it
    if not pytest_mode:  # the plugin's default (text cassettes beside the test) stays
        env["PYRULA_STORE"] = str(tmp_path / ".pyrula")
    return env


@pytest.mark.parametrize("example", COLLECTED, ids=[e.id for e in COLLECTED])
def test_example(example: Example, tmp_path: Path, host: Host) -> None:
    reason = example.directive("not run")
    if reason is not None:
        pytest.skip(f"not run: {reason}")
    for leg in example.legs():
        modules = [m for m, of in OPTIONAL.items() if of == leg]
        if not any(find_spec(m) for m in modules) and leg != LEG:
            pytest.skip(f"needs the {leg} leg's packages ({', '.join(modules)}); it runs there")
    pytest_mode = example.is_test_module
    script = tmp_path / ("test_example.py" if pytest_mode else "example.py")
    script.write_text(example.source + "\n")
    replies = example.directive("replies")
    with Server(any_provider.reply(_turns(replies) if replies else ())) as server:
        env = _environment(server.url, tmp_path, pytest_mode=pytest_mode)
        done = host.run("pytest" if pytest_mode else "script", script, env)
    late = f" (it ran past {TIMEOUT_S} s)" if done.status == -signal.SIGALRM else ""
    assert done.status == 0, (
        f"{example.id} failed (exit {done.status}{late}); fix the block or its marker.\n"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-6000:]}"
    )
    if pytest_mode:
        assert re.search(r"\b[1-9]\d* passed", done.stdout), done.stdout[-2000:]


def test_every_not_run_block_names_a_test_that_exists() -> None:
    wrong = []
    for example in ALL:
        reason = example.directive("not run")
        if reason is None:
            continue
        ids = _TEST_ID.findall(reason)
        if not ids or not all(known_test(i) for i in ids):
            wrong.append(f"{example.id}: {reason!r}")
    assert wrong == [], (
        "a `not run` block must name the test that covers it (tests/path.py::test_name), "
        f"and the test must exist: {wrong}"
    )


def test_the_readme_and_the_docs_have_examples() -> None:
    assert any(e.page == "README.md" for e in ALL)
    assert any(e.page.startswith("docs/") for e in ALL)
