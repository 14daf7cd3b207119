"""CI legs. Each installs exactly the versions pinned in `constraints/<leg>.txt` (made by
`nox -s lock`), so a leg is reproducible and an upstream release arrives as a deliberate bump.

- `tests(stack=...)`: the whole suite, once per HTTP stack the SDKs use (SDK-FACTS.md), on the
  newest releases of each SDK's major line when the constraints were last made.
- `compat(versions=...)`: the drop-ins' tests (tests/agents/compat: conformance, surfaces,
  instructor) on every floor, locked and dedicated version the spec's table names.

When nox ends it prints how many tests each leg's pytest ran (`tests run per leg:`).
"""

from __future__ import annotations

import atexit
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nox

nox.options.sessions = [
    "lint",
    "tests",
    "compat",
    "mcp",
    "langchain",
    "pydantic_ai",
    "openai_agents",
]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"

# What each leg asks for; `nox -s lock` resolves it into constraints/<leg>.txt. instructor caps
# jiter below what openai 3.4+ needs, so it runs on openai 2.x and on 3.3.0 (SDK-FACTS.md).
_INSTRUCTOR = ["instructor==1.17.0", "jsonref>=1,<2"]  # jsonref: instructor's genai mode
LEGS: dict[str, list[str]] = {
    # The whole suite, newest of each major line.
    "httpx2": ["openai>=3.41,<4", "anthropic>=2.3,<3", "google-genai>=3,<4", "boto3>=1.38,<2"],
    "httpx": [
        "openai>=2.2,<3",
        "anthropic>=0.47,<1",
        "google-genai>=1.46,<3",
        "boto3>=1.38,<2",
        *_INSTRUCTOR,
    ],
    # The drop-ins' tests on the spec's table of tested versions.
    "floors": [
        "openai==2.2.0",
        "anthropic==0.47.0",
        "google-genai==1.46.0",
        "boto3==1.38.0",
        *_INSTRUCTOR,
    ],
    "locked": [
        "openai==2.41.0",
        "anthropic==0.106.0",
        "google-genai==2.34.0",
        "boto3==1.43.24",
        *_INSTRUCTOR,
    ],
    "dedicated": ["openai==3.41.0", "anthropic==2.3.0", "google-genai>=3,<4", "boto3==1.43.24"],
    "instructor-openai3": [
        "openai==3.3.0",
        "anthropic==2.3.0",
        "google-genai>=3,<4",
        "boto3==1.43.24",
        *_INSTRUCTOR,
    ],
}
# The MCP SDK: the 1.x floor and the locked 1.x, each on the httpx2 stack. The dedicated 2.x line
# (mcp 2.3.0) is the one the `tests` legs install, so they run its tests already.
MCP = {"1.24": "mcp==1.24.0", "1": "mcp==1.30.0"}
for _line, _mcp in MCP.items():
    LEGS[f"mcp-{_line}"] = [*LEGS["httpx2"], _mcp]

# LangChain and LangGraph (issue 15): the spec's floors (langchain-core 0.3.67, langgraph 1.0.0),
# its ceilings (1.4.1, 1.2.4) and the newest releases. langchain-openai pins the openai major:
# 0.3.27 is the last to take langchain-core 0.3.67, and it needs openai 1.x, so these legs
# install pyrula without its extras (`PLAIN`) and bring their own test tools.
_LANGCHAIN_BASE = [
    "pytest>=8,<10",
    "pytest-xdist>=3.5,<4",
    "hypothesis>=6.100,<7",
    "anthropic>=0.47,<1",
    "google-genai>=1.46,<3",
    "boto3>=1.38,<2",
]
LANGCHAIN = {
    "floor": [
        "langchain-core==0.3.67",
        "langgraph==1.0.0",
        "langchain-openai==0.3.27",
        "openai==1.109.1",
        "langchain-anthropic==0.3.16",
    ],
    "ceiling": [
        "langchain-core==1.4.1",
        "langgraph==1.2.4",
        "langchain-openai==1.2.2",
        "openai>=2.2,<3",
        "langchain-anthropic==1.4.4",
    ],
    "newest": [
        "langchain-core<2",
        "langgraph<2",
        "langchain-openai<2",
        "openai>=2.2,<3",
        "langchain-anthropic<2",
    ],
}
for _name, _wanted in LANGCHAIN.items():
    LEGS[f"langchain-{_name}"] = [*_LANGCHAIN_BASE, *_wanted]
PLAIN = {f"langchain-{name}" for name in LANGCHAIN}

# PyrulaDurability: the spec's tested range (pydantic-ai-slim 2.62 - 2.63) and the newest release,
# on the httpx2 stack its models use. The OpenAI Agents SDK recipe: openai-agents 0.24 needs
# openai 3 (the spec tests it on 3.41).
PYDANTIC_AI = {"2.62": "==2.62.0", "2.63": "==2.63.0", "newest": ">=2.62,<3"}
for _name, _pin in PYDANTIC_AI.items():
    LEGS[f"pydantic-ai-{_name}"] = [*LEGS["httpx2"], f"pydantic-ai-slim[openai,anthropic]{_pin}"]
LEGS["openai-agents"] = [
    "openai-agents==0.24.0",
    "openai==3.41.0",
    "anthropic>=2.3,<3",
    "google-genai>=3,<4",
    "boto3>=1.38,<2",
]

# Lint type-checks every integration against its framework's own types, so it installs them all.
LEGS["lint"] = [
    "openai>=3.41,<4",
    "anthropic>=2.3,<3",
    "google-genai>=3,<4",
    "boto3>=1.38,<2",
    "openai-agents>=0.24,<0.25",
]

# Which leg's requests go over `httpx2` (openai 3.x, anthropic 2.x) or `httpx` (2.x, 0.x).
STACK_OF = {
    "httpx2": "httpx2",
    "httpx": "httpx",
    "floors": "httpx",
    "locked": "httpx",
    "dedicated": "httpx2",
    "instructor-openai3": "httpx2",
    **{f"mcp-{line}": "httpx2" for line in MCP},
    **{leg: "httpx" for leg in PLAIN},
    **{f"pydantic-ai-{name}": "httpx2" for name in PYDANTIC_AI},
    "openai-agents": "httpx2",
}
COMPAT_LEGS = ["floors", "locked", "dedicated", "instructor-openai3"]


def _project(leg: str) -> str:
    if leg in PLAIN:
        return "."
    return ".[dev,gemini,mcp,pydantic-ai,ui]" if leg == "lint" else ".[dev,gemini,ui]"


def _install(session: nox.Session, leg: str) -> None:
    session.install("-e", _project(leg), *LEGS[leg], "-c", f"constraints/{leg}.txt")
    session.run("python", "-c", _VERSIONS, leg)


# Printed by each leg: the exact versions it runs (CI's log is the record of what was tested).
_VERSIONS = (
    "import sys; from importlib import metadata as m\n"
    "names = ('openai', 'anthropic', 'google-genai', 'boto3', 'instructor', 'mcp',"
    " 'langchain-core', 'langgraph', 'langchain-openai', 'langchain-anthropic',"
    " 'pydantic-ai-slim', 'openai-agents',"
    " 'httpx', 'httpx2')\n"
    "have = {d.metadata['Name'].lower(): d.version for d in m.distributions()}\n"
    "print(f'leg {sys.argv[1]}: ' + ', '.join(f'{n} {have[n]}' for n in names if n in have))"
)


# What each leg's pytest ran (its JUnit report), printed as one table when nox ends: CI's log
# then shows per leg how many tests ran, and a leg that ran none stands out.
_REPORTS: dict[str, Path] = {}


def _pytest(session: nox.Session, *args: str, env: dict[str, str]) -> None:
    name = re.sub(r"[^\w.-]+", "-", session.name).strip("-")
    report = Path(".nox", "reports", f"{name}.xml").resolve()
    report.unlink(missing_ok=True)
    _REPORTS[session.name] = report
    session.run("pytest", f"--junitxml={report}", *args, env=env)


def _counted(report: Path) -> str:
    if not report.exists():
        return "no report: pytest did not finish"
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests, failures, errors, skipped = (
        sum(int(suite.get(key, 0)) for suite in suites)
        for key in ("tests", "failures", "errors", "skipped")
    )
    counts = f"{tests - failures - errors - skipped} passed"
    for number, word in ((failures, "failed"), (errors, "errors"), (skipped, "skipped")):
        if number:
            counts += f", {number} {word}"
    return counts


@atexit.register
def _tests_per_leg() -> None:
    if not _REPORTS:
        return
    width = max(map(len, _REPORTS))
    print("tests run per leg:")
    for name, report in _REPORTS.items():
        print(f"  {name:<{width}}  {_counted(report)}")


@nox.session
@nox.parametrize("stack", ["httpx2", "httpx"])
def tests(session: nox.Session, stack: str) -> None:
    _install(session, stack)
    # The store and conformance tests run on both backends in the httpx2 leg, on LMDB in this one.
    backends = {"PYRULA_TEST_BACKENDS": "lmdb"} if stack == "httpx" else {}
    env = {"PYRULA_TEST_STACK": stack, **backends}
    # What does not go through an SDK's HTTP stack runs once, on the httpx2 leg: the browser,
    # PostgreSQL, store-damage and git sample-project tests (CI stays under 30 minutes).
    once = _ONCE if stack == "httpx" else []
    # The httpx2 leg runs the whole suite, so it is the one that fails on a descriptor left to
    # the collector: an unclosed socket, file or pipe (a ResourceWarning in a finalizer).
    leaks = _LEAKS_FAIL if stack == "httpx2" else []
    _pytest(session, "-n", "2", "-q", *leaks, *once, *session.posargs, env=env)


_LEAKS_FAIL = [
    "-W",
    "error::ResourceWarning",
    "-W",
    "error::pytest.PytestUnraisableExceptionWarning",
]


_STACK_FREE = [
    "tests/ui",
    "tests/inspection",
    "tests/runtime/test_hosts.py",
    "tests/runtime/test_async_runs.py",
    "tests/runtime/test_purging.py",
    "tests/journal/test_pg_plans.py",
    "tests/journal/test_postgres.py",
    "tests/journal/test_damage.py",
    "tests/test_pytest_cassettes.py",
]
_ONCE = [
    *(f"--ignore={path}" for path in _STACK_FREE),
    # Two pytest-xdist sessions in subprocesses: the plugin's sharing, whatever the stack.
    "--deselect=tests/test_pytest_plugin.py::test_xdist_workers_share_one_store",
    # The docs' examples are written for the newest SDKs (openai 3.x, anthropic 2.x: httpx2).
    "--ignore=tests/test_docs_examples.py",
]
# The docs' examples that need a leg's framework run on that leg: its PYRULA_REQUIRE_* variable
# selects them (tests/test_docs_examples.py).
DOCS_EXAMPLES = "tests/test_docs_examples.py"


@nox.session
@nox.parametrize("versions", COMPAT_LEGS)
def compat(session: nox.Session, versions: str) -> None:
    _install(session, versions)
    _pytest(
        session,
        "-n",
        "2",
        "-q",
        "tests/agents/compat",
        *session.posargs,
        env={"PYRULA_TEST_STACK": STACK_OF[versions]},
    )


@nox.session
def lint(session: nox.Session) -> None:
    # mypy checks the Gemini drop-in against google-genai's own types.
    # ... and the framework integrations against the frameworks' own types.
    _install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "pyrula", "fingerprints", "proxy", "benchmarks")


@nox.session
@nox.parametrize("line", list(MCP))
def mcp(session: nox.Session, line: str) -> None:
    """MCP on each major line of the `mcp` SDK: the native agents' MCP tools (issue 13) and the
    durable MCP tool server (issue 14)."""
    _install(session, f"mcp-{line}")
    _pytest(
        session,
        "-q",
        "-n",
        "2",
        "tests/agents/native/test_mcp.py",
        "tests/agents/native/test_mcp_crash.py",
        "tests/agents/mcp",
        env={"PYRULA_TEST_STACK": "httpx2"},
    )


@nox.session
@nox.parametrize("versions", list(LANGCHAIN))
def langchain(session: nox.Session, versions: str) -> None:
    """LangChain and LangGraph integrations on the spec's floors, ceilings and the newest."""
    _install(session, f"langchain-{versions}")
    _pytest(
        session,
        "-q",
        "tests/agents/integrations",
        DOCS_EXAMPLES,
        *session.posargs,
        env={"PYRULA_TEST_STACK": "httpx", "PYRULA_REQUIRE_LANGCHAIN": "1"},
    )


@nox.session
@nox.parametrize("release", list(PYDANTIC_AI))
def pydantic_ai(session: nox.Session, release: str) -> None:
    """PyrulaDurability on the spec's Pydantic AI releases and the newest."""
    _install(session, f"pydantic-ai-{release}")
    _pytest(
        session,
        "-n",
        "2",
        "-q",
        "tests/agents/integrations/test_pydantic_ai.py",
        DOCS_EXAMPLES,
        *session.posargs,
        env={"PYRULA_TEST_STACK": "httpx2", "PYRULA_REQUIRE_PYDANTIC_AI": "1"},
    )


@nox.session
def openai_agents(session: nox.Session) -> None:
    """The OpenAI Agents SDK recipe on openai-agents 0.24 and openai 3.41."""
    _install(session, "openai-agents")
    _pytest(
        session,
        "-n",
        "2",
        "-q",
        "tests/agents/integrations/test_openai_agents.py",
        DOCS_EXAMPLES,
        *session.posargs,
        env={"PYRULA_TEST_STACK": "httpx2", "PYRULA_REQUIRE_OPENAI_AGENTS": "1"},
    )


@nox.session(venv_backend="uv")
def lock(session: nox.Session) -> None:
    """Resolve every leg into constraints/<leg>.txt (run it to bump a pin, then commit)."""
    session.install("uv")
    for leg, wanted in LEGS.items():
        source = f"constraints/{leg}.in"
        with open(source, "w") as out:
            out.write(f"-e {_project(leg)}\n" + "".join(f"{w}\n" for w in wanted))
        target = f"constraints/{leg}.txt"
        session.run("uv", "pip", "compile", "-q", "--no-header", source, "-o", target)
        with open(target) as pinned:
            lines = [line for line in pinned if not line.startswith(("-e ", "    # via -e"))]
        with open(target, "w") as pinned_out:
            pinned_out.write(f"# `nox -s lock` resolved {source}; do not edit by hand\n")
            pinned_out.writelines(lines)
