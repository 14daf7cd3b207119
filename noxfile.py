"""Test legs: the suite runs once per HTTP stack the SDKs use (SDK-FACTS.md)."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests", "pydantic_ai", "openai_agents"]
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
    # ... and the framework integrations against the frameworks' own types.
    session.install("-e", ".[dev,gemini,pydantic-ai]", "openai-agents>=0.24,<0.25")
    session.run("ruff", "check", ".")
    session.run("mypy", "pyrula", "fingerprints", "proxy")


# PyrulaDurability: the spec's tested range (pydantic-ai-slim 2.62 - 2.63) and the newest release,
# on the httpx2 stack its models use.
PYDANTIC_AI = {"2.62": "==2.62.0", "2.63": "==2.63.0", "newest": ">=2.62,<3"}


@nox.session
@nox.parametrize("release", list(PYDANTIC_AI))
def pydantic_ai(session: nox.Session, release: str) -> None:
    pin = f"pydantic-ai-slim[openai,anthropic]{PYDANTIC_AI[release]}"
    session.install("-e", ".[dev]", *STACKS["httpx2"], pin)
    test = "tests/agents/integrations/test_pydantic_ai.py"
    env = {"PYRULA_TEST_STACK": "httpx2"}
    session.run("pytest", "-n", "2", "-q", test, *session.posargs, env=env)


# The OpenAI Agents SDK recipe: openai-agents 0.24 needs openai 3 (the spec tests it on 3.41).
OPENAI_AGENTS = ["openai-agents==0.24.0", "openai==3.41.0"]


@nox.session
def openai_agents(session: nox.Session) -> None:
    session.install("-e", ".[dev]", *STACKS["httpx2"][1:], *OPENAI_AGENTS)
    test = "tests/agents/integrations/test_openai_agents.py"
    env = {"PYRULA_TEST_STACK": "httpx2"}
    session.run("pytest", "-n", "2", "-q", test, *session.posargs, env=env)
