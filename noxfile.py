"""Test legs: the suite runs once per HTTP stack the SDKs use (SDK-FACTS.md)."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests", "mcp"]
nox.options.reuse_existing_virtualenvs = True

# httpx2: openai 3.x, anthropic 2.x and google-genai 3.x. httpx: openai 2.x, anthropic 0.x and
# google-genai 1.x/2.x. instructor caps jiter below what openai 3.x needs, so it is tested on the
# httpx leg only (SDK-FACTS.md).
_BOTH = ["boto3>=1.38,<2"]
STACKS = {
    "httpx2": ["openai>=3.41,<4", "anthropic>=2.3,<3", "google-genai>=3,<4", *_BOTH],
    "httpx": [
        "openai>=2.2,<3",
        "anthropic>=0.47,<1",
        "google-genai>=1.46,<3",
        "instructor>=1.17,<2",
        "jsonref>=1,<2",  # instructor's google-genai mode imports it
        *_BOTH,
    ],
}


@nox.session
@nox.parametrize("stack", list(STACKS))
def tests(session: nox.Session, stack: str) -> None:
    session.install("-e", ".[dev]", *STACKS[stack])
    session.run("pytest", "-n", "2", "-q", *session.posargs, env={"PYRULA_TEST_STACK": stack})


@nox.session
def lint(session: nox.Session) -> None:
    # mypy checks the Gemini drop-in against google-genai's own types.
    session.install("-e", ".[dev,gemini]")
    session.run("ruff", "check", ".")
    session.run("mypy", "pyrula", "fingerprints", "proxy")


# The durable MCP tool server on each major of the mcp SDK: 1.x (FastMCP) and 2.x (MCPServer).
MCP = {"1": "mcp==1.30.0", "2": "mcp==2.3.0"}


@nox.session
@nox.parametrize("major", list(MCP))
def mcp(session: nox.Session, major: str) -> None:
    session.install("-e", ".[dev]", MCP[major])
    session.run("pytest", "-q", "tests/agents/mcp", *session.posargs)
